//! Runs the shared scenario table (`tests/cases/scenarios.json`) against both stores.

use crate::common;

use ratekeeper_core::{Limiter, OnError, Rule, RuleSet, Store};
use serde_json::Value;
use std::sync::Arc;

fn load() -> Vec<Value> {
    // (compiled in: a path made of CARGO_MANIFEST_DIR would tie the test
    // binary to one checkout, and a build cache could not reuse it)
    let text = include_str!("../../../tests/cases/scenarios.json");
    let doc: Value = serde_json::from_str(text).unwrap();
    doc["cases"].as_array().unwrap().clone()
}

fn rules_of(case: &Value) -> RuleSet {
    match &case["rules"] {
        Value::String(text) => RuleSet::parse(text).unwrap(),
        Value::Array(pairs) => RuleSet::new(
            pairs
                .iter()
                .map(|p| {
                    Rule::from_seconds(p[0].as_i64().unwrap() as i128, p[1].as_f64().unwrap())
                        .unwrap()
                })
                .collect(),
        )
        .unwrap(),
        other => panic!("bad rules {other}"),
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

fn run_case(case: &Value, store: Arc<dyn Store>) -> Result<(), String> {
    let name = case["name"].as_str().unwrap();
    let limiter = Limiter::with_store(rules_of(case), store, OnError::Raise);
    for (i, step) in case["steps"].as_array().unwrap().iter().enumerate() {
        let key = step["key"].as_str().unwrap().as_bytes();
        let at = format!("{name} step {i} ({step})");
        let op = step["op"].as_str().unwrap();
        if op == "reset" {
            limiter.reset(key).map_err(|e| format!("{at}: {e}"))?;
            continue;
        }
        let cost = step.get("cost").and_then(Value::as_u64).unwrap_or(1);
        let now = step["now"].as_f64();
        let d = match op {
            "check" => limiter.check(key, cost, now),
            "peek" => limiter.peek(key, cost, now),
            other => panic!("unknown op {other}"),
        }
        .map_err(|e| format!("{at}: {e}"))?;
        let expect = &step["expect"];
        let secs = |ms: u64| ms as f64 / 1000.0;
        let mut wrong = Vec::new();
        if let Some(allowed) = expect.get("allowed") {
            if allowed.as_bool() != Some(d.allowed()) {
                wrong.push(format!("allowed {}", d.allowed()));
            }
        }
        if let Some(retry) = expect.get("retry_after") {
            let ok = match (retry.as_f64(), d.retry_after_ms) {
                (None, None) => true,
                (Some(want), Some(got)) => close(want, secs(got)),
                _ => false,
            };
            if !ok {
                wrong.push(format!("retry_after {:?}", d.retry_after_ms.map(secs)));
            }
        }
        if let Some(remaining) = expect.get("remaining") {
            let got: Vec<u64> = d.rules.iter().map(|r| r.remaining).collect();
            let want: Vec<u64> = remaining
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect();
            if got != want {
                wrong.push(format!("remaining {got:?}"));
            }
        }
        if let Some(reset) = expect.get("reset_after") {
            let got: Vec<f64> = d.rules.iter().map(|r| secs(r.reset_after_ms)).collect();
            let want: Vec<f64> = reset
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect();
            if got.len() != want.len() || got.iter().zip(&want).any(|(a, b)| !close(*a, *b)) {
                wrong.push(format!("reset_after {got:?}"));
            }
        }
        if let Some(limit) = expect.get("limit") {
            if limit.as_u64() != Some(d.binding_state().limit) {
                wrong.push(format!("limit {}", d.binding_state().limit));
            }
        }
        if let Some(binding) = expect.get("binding") {
            if binding.as_u64() != Some(d.binding as u64) {
                wrong.push(format!("binding {}", d.binding));
            }
        }
        if !wrong.is_empty() {
            return Err(format!("{at}: got {}", wrong.join(", ")));
        }
    }
    Ok(())
}

/// Runs every case on a store of its own from `make`; each store must say
/// its checks went `path`'s way (module, script or memory).
fn run_all(make: fn() -> Arc<dyn Store>, path: &str) {
    let cases = load();
    assert!(
        cases.len() >= 25,
        "the table has only {} cases",
        cases.len()
    );
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| {
            let store = make();
            let outcome = run_case(case, store.clone());
            let stats = store.stats();
            let other = match path {
                "module" => stats.script_calls,
                "script" => stats.module_calls,
                _ => stats.module_calls + stats.script_calls,
            };
            if stats.path != path || other > 0 {
                return Some(format!("{}: went the wrong way: {stats:?}", case["name"]));
            }
            outcome.err()
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn scenarios_on_memory() {
    run_all(common::memory, "memory");
}

#[test]
fn scenarios_on_redis() {
    run_all(common::redis, "script");
}

#[test]
fn scenarios_on_the_cluster() {
    if common::cluster().is_some() {
        run_all(|| common::cluster().unwrap(), "script");
    }
}

#[test]
fn scenarios_on_redis_with_the_module() {
    if common::redis_module().is_some() {
        run_all(|| common::redis_module().unwrap(), "module");
    }
}

#[test]
fn scenarios_on_the_cluster_with_the_module() {
    if common::cluster_module().is_some() {
        run_all(|| common::cluster_module().unwrap(), "module");
    }
}
