//! Helpers shared by the integration tests: the test Redis and fresh stores.
#![allow(dead_code)]

use ratekeeper_core::{store, Store, StoreOptions};
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

/// A fresh (uniquely prefixed) store on the test Redis; panics with advice when Redis is absent.
pub fn redis() -> Arc<dyn Store> {
    let options = StoreOptions {
        prefix: unique_prefix(),
        timeout: std::time::Duration::from_secs(5),
        connect_timeout: std::time::Duration::from_secs(2),
        ..StoreOptions::default()
    };
    let url = redis_url();
    let store = store::open(&url, &options).unwrap();
    store.reset(b"ping").unwrap_or_else(|e| {
        panic!("no Redis at {url} ({e}): run `bash scripts/test`, which starts one")
    });
    store
}

/// Both stores, named.
pub fn both() -> Vec<(&'static str, Arc<dyn Store>)> {
    vec![("memory", memory()), ("redis", redis())]
}

/// A raw connection to the test Redis.
pub fn raw_redis() -> redis::Connection {
    redis::Client::open(redis_url())
        .unwrap()
        .get_connection()
        .unwrap()
}
