//! Helpers shared by the integration tests: the test Redis and fresh stores.
#![allow(dead_code)]

use ratekeeper_core::{store, ModuleUse, Store, StoreOptions};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The Redis the tests use: `RATEKEEPER_TEST_REDIS` (scripts/test starts one and sets it).
pub fn redis_url() -> String {
    std::env::var("RATEKEEPER_TEST_REDIS").unwrap_or_else(|_| "redis://127.0.0.1:6379/0".to_owned())
}

/// A prefix no other test (or earlier run) uses, so tests never share keys.
pub fn unique_prefix() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "rktest-{}-{nanos}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A fresh memory store.
pub fn memory() -> Arc<dyn Store> {
    store::open("memory://", &StoreOptions::default()).unwrap()
}

/// A store at `url` under a prefix of its own, with the tests' timeouts and
/// `redis_module` as given (connected on first use).
pub fn open_with(url: &str, module: ModuleUse) -> Arc<dyn Store> {
    let options = StoreOptions {
        prefix: unique_prefix(),
        timeout: std::time::Duration::from_secs(5),
        connect_timeout: std::time::Duration::from_secs(2),
        redis_module: module,
        ..StoreOptions::default()
    };
    store::open(url, &options).unwrap()
}

/// A fresh (uniquely prefixed) store on the test Redis; panics with advice when Redis is absent.
pub fn redis() -> Arc<dyn Store> {
    let url = redis_url();
    let store = open_with(&url, ModuleUse::Auto);
    store.reset(b"ping", "").unwrap_or_else(|e| {
        panic!("no Redis at {url} ({e}): run `bash scripts/test`, which starts one")
    });
    store
}

/// A fresh store on the test Redis Cluster (`RATEKEEPER_TEST_CLUSTER`, which
/// scripts/test sets), or None when no cluster is configured.
pub fn cluster() -> Option<Arc<dyn Store>> {
    let url = std::env::var("RATEKEEPER_TEST_CLUSTER").ok()?;
    let store = open_with(&url, ModuleUse::Auto);
    store
        .reset(b"ping", "")
        .unwrap_or_else(|e| panic!("no Redis Cluster at {url} ({e})"));
    Some(store)
}

/// The URL in `var` (set by scripts/test); None with a note when it is not
/// set, which under CI is a failure instead.
pub fn configured(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(url) => Some(url),
        Err(_) if std::env::var("CI").is_ok() => panic!("{var} is not set (scripts/test sets it)"),
        Err(_) => {
            eprintln!("{var} is not set: what needs it is not tested (scripts/test sets it)");
            None
        }
    }
}

/// A fresh store at the URL in `var`, with `redis_module` as given.
pub fn store_at(var: &str, module: ModuleUse) -> Option<Arc<dyn Store>> {
    let url = configured(var)?;
    let store = open_with(&url, module);
    store
        .reset(b"ping", "")
        .unwrap_or_else(|e| panic!("no Redis at {url} ({e})"));
    Some(store)
}

/// A fresh store on the test Redis that has the ratekeeper module loaded
/// (`RATEKEEPER_TEST_REDIS_MODULE`).
pub fn redis_module() -> Option<Arc<dyn Store>> {
    store_at("RATEKEEPER_TEST_REDIS_MODULE", ModuleUse::Require)
}

/// A fresh store on the test Cluster that has the module loaded
/// (`RATEKEEPER_TEST_CLUSTER_MODULE`).
pub fn cluster_module() -> Option<Arc<dyn Store>> {
    store_at("RATEKEEPER_TEST_CLUSTER_MODULE", ModuleUse::Require)
}

/// Every store, named: memory, Redis, and the Cluster when configured, then
/// Redis and the Cluster with the module loaded (checks through it only).
pub fn all() -> Vec<(&'static str, Arc<dyn Store>)> {
    let mut stores = vec![("memory", memory()), ("redis", redis())];
    match cluster() {
        Some(store) => stores.push(("cluster", store)),
        None => eprintln!(
            "RATEKEEPER_TEST_CLUSTER is not set: the Cluster is not tested (scripts/test sets it)"
        ),
    }
    if let Some(store) = redis_module() {
        stores.push(("redis-module", store));
    }
    if let Some(store) = cluster_module() {
        stores.push(("cluster-module", store));
    }
    stores
}

/// Polls `INFO section` on `con`, 50 ms apart and `tries` times at most,
/// until it holds every one of `wanted`; whether it did.
pub fn info_holds(
    con: &mut redis::Connection,
    section: &str,
    wanted: &[&str],
    tries: usize,
) -> bool {
    (0..tries).any(|_| {
        let info: String = redis::cmd("INFO").arg(section).query(con).unwrap();
        let holds = wanted.iter().all(|w| info.contains(w));
        if !holds {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        holds
    })
}

/// A raw connection to the test Redis.
pub fn raw_redis() -> redis::Connection {
    redis::Client::open(redis_url())
        .unwrap()
        .get_connection()
        .unwrap()
}

/// How many replicas acknowledged every write made so far, on any
/// connection, within `timeout_ms` (`WAIT`). WAIT waits for the offset of
/// its own connection's last write, and a test's checks write on the store's
/// connections: a write here comes after all of them in the stream (without
/// it WAIT answers at once, before a replica applied anything).
pub fn replicated(master: &mut redis::Connection, replicas: i64, timeout_ms: u64) -> i64 {
    let _: () = redis::cmd("SET")
        .arg("rk-test:fence")
        .arg(1)
        .query(master)
        .unwrap();
    redis::cmd("WAIT")
        .arg(replicas)
        .arg(timeout_ms)
        .query(master)
        .unwrap()
}

/// A Redis server of a test's own, on a free port, that the test may stop,
/// restart, freeze and thaw (always by its pid). Killed when dropped.
pub struct OwnRedis {
    pub port: u16,
    dir: std::path::PathBuf,
    extra: Vec<String>,
    pid: Option<u32>,
}

impl OwnRedis {
    /// Starts one, with extra `redis-server` arguments.
    pub fn start(extra: &[&str]) -> OwnRedis {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = std::env::temp_dir().join(format!("rk-own-redis-{port}-{}", unique_prefix()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut redis = OwnRedis {
            port,
            dir,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            pid: None,
        };
        redis.restart();
        redis
    }

    /// The extra `redis-server` arguments of the next (re)start.
    pub fn set_args(&mut self, extra: &[&str]) {
        self.extra = extra.iter().map(|s| s.to_string()).collect();
    }

    /// The URL of this server.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Starts the server again on the same port (after `stop`).
    pub fn restart(&mut self) {
        let pidfile = self.dir.join("redis.pid");
        let _ = std::fs::remove_file(&pidfile);
        let status = std::process::Command::new("redis-server")
            .args([
                "--port",
                &self.port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--daemonize",
                "yes",
            ])
            .arg("--pidfile")
            .arg(&pidfile)
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.extra)
            .status()
            .expect("redis-server is not installed: run scripts/setup-debian");
        assert!(status.success());
        // up and done loading its data (an AOF, an RDB): until then Redis
        // answers LOADING, so a test would meet BusyLoading
        for _ in 0..400 {
            if let Ok(text) = std::fs::read_to_string(&pidfile) {
                if let Ok(pid) = text.trim().parse() {
                    self.pid = Some(pid);
                    if self.answers_ping() {
                        return;
                    }
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("redis-server on port {} did not start", self.port);
    }

    /// Whether the server answers PING with PONG (not LOADING), or asks for
    /// its password (a server with `requirepass` says that first).
    fn answers_ping(&self) -> bool {
        let Ok(client) = redis::Client::open(self.url()) else {
            return false;
        };
        let Ok(mut con) = client.get_connection_with_timeout(std::time::Duration::from_secs(1))
        else {
            return false;
        };
        match redis::cmd("PING").query::<String>(&mut con) {
            Ok(pong) => pong == "PONG",
            Err(e) => e.code() == Some("NOAUTH"),
        }
    }

    fn signal(&self, name: &str) {
        if let Some(pid) = self.pid {
            let _ = std::process::Command::new("kill")
                .args([&format!("-{name}"), &pid.to_string()])
                .status();
        }
    }

    /// Stops the server (SIGTERM) and waits until its port is closed.
    pub fn stop(&mut self) {
        self.signal("CONT");
        self.signal("TERM");
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
                self.pid = None;
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        panic!("redis-server on port {} did not stop", self.port);
    }

    /// Freezes the server (SIGSTOP): connections open, nothing answers.
    pub fn freeze(&self) {
        self.signal("STOP");
    }

    /// Thaws a frozen server (SIGCONT).
    pub fn thaw(&self) {
        self.signal("CONT");
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        self.signal("CONT");
        self.signal("KILL");
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
