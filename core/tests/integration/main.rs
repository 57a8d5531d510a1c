//! The core's integration tests, in one test binary: each release link of a
//! test binary does the whole thin-LTO pass again, so they share one. The
//! tests that measure their process (memory_flood's allocator), the test
//! Redis's command counts (redis_footprint) or set the process-wide test
//! clock (testing_hooks) keep binaries of their own.

#[path = "../common/mod.rs"]
mod common;

mod batch_and_cache;
mod concurrency;
mod controls;
mod engine_differential;
mod failures;
mod frozen_redis;
mod gate_count;
mod gate_in_flight;
mod gate_meters;
mod hold_differential;
mod holds;
mod meters;
mod module_server;
mod parser_fuzz;
mod property;
mod reservations;
mod scenarios;
