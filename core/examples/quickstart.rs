//! The quick start on the embedded store: `cargo run --example quickstart`.

use ratekeeper_core::{Limiter, OnError, RuleSet, StoreOptions};

fn main() -> Result<(), ratekeeper_core::Error> {
    let rules = RuleSet::parse("3/second; 5/minute")?;
    let limiter = Limiter::open(rules, "memory://", &StoreOptions::default(), OnError::Allow)?;
    for i in 1..=7 {
        let d = limiter.check(b"user:42", 1, None)?;
        let b = d.binding_state();
        println!(
            "request {i}: allowed={} remaining={} of {} per {} retry_after={:?}s",
            d.allowed(),
            b.remaining,
            b.limit,
            b.window_name(),
            d.retry_after_ms.map(|ms| ms as f64 / 1000.0)
        );
    }
    Ok(())
}
