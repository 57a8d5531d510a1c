//! The edge benchmark's baseline: a bare Redis PING round trip from the
//! runtime the server runs on (tokio, one multiplexed connection, as the
//! server's checks use). Prints `{"name": "edge_tokio_ping_p50", "p50_us": ...}`.
//!
//!     cargo run --release --example ping -- redis://127.0.0.1:6379/0 20000

use std::time::Instant;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args.next().ok_or("give a Redis URL and a count")?;
    let count: usize = args.next().unwrap_or_else(|| "20000".into()).parse()?;
    let client = redis::Client::open(url)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let mut times = Vec::with_capacity(count);
    for i in 0..count + count / 10 {
        let started = Instant::now();
        let _: String = redis::cmd("PING").query_async(&mut conn).await?;
        if i >= count / 10 {
            times.push(started.elapsed().as_nanos() as f64 / 1000.0);
        }
    }
    times.sort_by(f64::total_cmp);
    println!(
        "{{\"name\": \"edge_tokio_ping_p50\", \"p50_us\": {:.1}}}",
        times[times.len() / 2]
    );
    Ok(())
}
