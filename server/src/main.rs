//! `ratekeeper-server`: the command line. See the crate docs and the docs
//! site's "At the edge" (docs/edge.md).

use ratekeeper_server::envoy::Rls;
use ratekeeper_server::error::ServerError;
use ratekeeper_server::state::{read_spec, Overrides, State};
use ratekeeper_server::{config, forward, logging};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

const USAGE: &str = "usage: ratekeeper-server --config FILE [--store URL] [--listen ADDR] [--grpc ADDR] [--check-config]
       ratekeeper-server --version

  --config FILE    the policy file (TOML; docs/edge.md)
  --store URL      the store (else $RATEKEEPER_STORE, else the file's [store] url, else memory://)
  --listen ADDR    the HTTP door: forward auth, /healthz, /metrics (default 127.0.0.1:8070)
  --grpc ADDR      the gRPC door: Envoy's rate limit service (default: off)
  --check-config   check the file (and the store URL) and exit: 0 when good, 2 when not
  --version        print the version and exit
SIGHUP reloads the file (a bad file keeps the policy in force); SIGTERM or SIGINT stops gracefully.";

struct Args {
    config: PathBuf,
    overrides: Overrides,
    check_only: bool,
}

fn args() -> Result<Args, String> {
    let mut config = None;
    let mut overrides = Overrides {
        store: std::env::var("RATEKEEPER_STORE")
            .ok()
            .filter(|s| !s.is_empty()),
        ..Overrides::default()
    };
    let mut check_only = false;
    let mut given = std::env::args().skip(1);
    while let Some(arg) = given.next() {
        let mut value = |name: &str| {
            given
                .next()
                .ok_or_else(|| format!("{name} needs a value\n{USAGE}"))
        };
        match arg.as_str() {
            "--config" => config = Some(PathBuf::from(value("--config")?)),
            "--store" => overrides.store = Some(value("--store")?),
            "--listen" => overrides.listen = Some(value("--listen")?),
            "--grpc" => overrides.grpc = Some(value("--grpc")?),
            "--check-config" => check_only = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            "-V" | "--version" => {
                println!("ratekeeper-server {}", env!("CARGO_PKG_VERSION"));
                std::process::exit(0);
            }
            other => {
                return Err(format!(
                    "unknown argument '{}'\n{USAGE}",
                    other.escape_debug()
                ))
            }
        }
    }
    let config = config.ok_or_else(|| format!("give --config FILE\n{USAGE}"))?;
    Ok(Args {
        config,
        overrides,
        check_only,
    })
}

fn main() {
    let args = match args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(2);
        }
    };
    if let Err(e) = logging::init() {
        eprintln!("ratekeeper-server: {e}");
        std::process::exit(2);
    }
    if args.check_only {
        match read_spec(&args.config, &args.overrides) {
            Ok(spec) => {
                println!(
                    "{}: ok: {} throttle(s), {} ban(s), HTTP on {}{}",
                    args.config.display(),
                    spec.throttles.len(),
                    spec.bans.len(),
                    config::listen(&spec),
                    spec.grpc
                        .map(|g| format!(", gRPC on {g}"))
                        .unwrap_or_default()
                );
                return;
            }
            Err(e) => {
                eprintln!("{}: {e}", args.config.display());
                std::process::exit(2);
            }
        }
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("ratekeeper-server: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = runtime.block_on(serve(args)) {
        log::error!("{e}");
        std::process::exit(1);
    }
}

async fn serve(args: Args) -> Result<(), ServerError> {
    let (config, overrides) = (args.config.clone(), args.overrides.clone());
    let state = tokio::task::spawn_blocking(move || State::open(config, overrides))
        .await
        .map_err(|e| ServerError::Io(e.to_string()))??;
    let state = Arc::new(state);
    let policy = state.policy();
    // the address lists, read once before the first request (later reads
    // happen off the request path)
    let _ = policy.warden().screen_async("0.0.0.0").await;
    let (stop_tx, stop_rx) = watch::channel(false);
    let listen = config::listen(policy.spec());
    let http = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| ServerError::Io(format!("cannot listen on {listen}: {e}")))?;
    let mut doors = Vec::new();
    {
        let app =
            forward::router(state.clone()).into_make_service_with_connect_info::<SocketAddr>();
        let mut stop = stop_rx.clone();
        doors.push(tokio::spawn(async move {
            axum::serve(http, app)
                .with_graceful_shutdown(async move {
                    let _ = stop.wait_for(|s| *s).await;
                })
                .await
                .map_err(|e| ServerError::Io(format!("the HTTP door failed: {e}")))
        }));
    }
    if let Some(address) = policy.spec().grpc {
        let grpc = tokio::net::TcpListener::bind(address)
            .await
            .map_err(|e| ServerError::Io(format!("cannot listen on {address}: {e}")))?;
        let incoming = tonic::transport::server::TcpIncoming::from(grpc);
        let service = Rls::service(state.clone());
        let mut stop = stop_rx.clone();
        doors.push(tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming_shutdown(incoming, async move {
                    let _ = stop.wait_for(|s| *s).await;
                })
                .await
                .map_err(|e| ServerError::Io(format!("the gRPC door failed: {e}")))
        }));
    }
    log::info!(
        "ratekeeper-server: {} throttle(s) on {}; HTTP on {}{}",
        policy.spec().throttles.len(),
        ratekeeper_core::store::redact(&policy.spec().settings.store),
        listen,
        policy
            .spec()
            .grpc
            .map(|g| format!(", gRPC on {g}"))
            .unwrap_or_default()
    );
    drop(policy);
    let mut hangup = signal(SignalKind::hangup()).map_err(|e| ServerError::Io(e.to_string()))?;
    let mut terminate =
        signal(SignalKind::terminate()).map_err(|e| ServerError::Io(e.to_string()))?;
    let mut interrupt =
        signal(SignalKind::interrupt()).map_err(|e| ServerError::Io(e.to_string()))?;
    loop {
        tokio::select! {
            _ = hangup.recv() => {
                let state = state.clone();
                let outcome = tokio::task::spawn_blocking(move || state.reload()).await;
                match outcome {
                    Ok(Ok(())) => log::info!("reloaded {}", args.config.display()),
                    Ok(Err(e)) => log::error!("reload refused, the policy in force is kept: {e}"),
                    Err(e) => log::error!("reload failed, the policy in force is kept: {e}"),
                }
            }
            _ = terminate.recv() => break,
            _ = interrupt.recv() => break,
        }
    }
    log::info!("stopping: finishing the requests under way");
    let _ = stop_tx.send(true);
    for door in doors {
        door.await.map_err(|e| ServerError::Io(e.to_string()))??;
    }
    // the denials since the record's last periodic write (one timeout at most)
    let _ = tokio::task::spawn_blocking(ratekeeper_core::flush_denials_at_exit).await;
    log::info!("stopped");
    Ok(())
}
