"""Turns the benchmark results (JSON lines) into the table of ratios, with
each target and whether it is met. Prints it; with --write, also to
bench/RESULTS.md.

    python3 bench/report.py RESULTS.jsonl [--write]
"""

import json
import os
import sys
from datetime import datetime, timezone

ROWS = [
    # (what, ours, against, ratio of, target, "le" = ours/against <= target, "ge" = against/ours >= target)
    ("Rust core `check()`, 4 rules, Redis on loopback", "rust_check_4_rules", "redis_benchmark_ping_p50", "redis-benchmark -c 1 PING (p50)", 1.3, "le"),
    ("Rust core `check()`, 4 rules (for reference)", "rust_check_4_rules", "rust_redis_rs_ping", "redis-rs PING, same client", None, "le"),
    ("Rust: redis-rs running a script that makes only a check's four Redis calls and no other work, the floor of a check through a script (for reference)", "rust_script_floor", "rust_redis_rs_ping_floor_paired", "redis-rs PING, batches alternating", None, "le"),
    ("Rust core `check()`, 4 rules (for reference)", "rust_check_4_rules", "rust_script_floor", "that floor script, same client", None, "le"),
    ("Python `check()`, 4 rules", "py_check_4_rules", "redis_py_ping", "redis-py PING", 1.0, "le"),
    ("Python `check()`, 4 rules", "py_check_4_rules", "limits_moving_window_4_rules", "`limits` MovingWindow, hit each of 4", 4.0, "ge"),
    ("Python `check()`, 4 rules", "py_check_4_rules", "django_ratelimit_4_rules", "django-ratelimit, 4 stacked", 15.0, "ge"),
    ("Ruby `check()`, 4 rules", "rb_check_4_rules", "redis_rb_ping", "redis-rb PING, batches alternating", 1.0, "le"),
    ("Ruby: redis-rb running a script that makes only a check's four Redis calls and no other work (for reference)", "redis_rb_script_floor", "redis_rb_ping", "redis-rb PING, batches alternating", None, "le"),
    ("Ruby `check()`, 4 rules (for reference)", "rb_check_4_rules", "redis_rb_script_floor", "that floor script from redis-rb", None, "le"),
    ("Rack middleware, 4 rules (`Rack::MockRequest`)", "rack_ratekeeper_4_rules", "rack_attack_4_throttles", "rack-attack, 4 throttles, batches alternating", 8.0, "ge"),
    ("Rack: the app making one redis-rb PING a request, the floor of any limiter that asks Redis (for reference)", "rack_ping_floor", "rack_attack_4_throttles", "rack-attack, 4 throttles, batches alternating", None, "ge"),
    ("Rack middleware, 4 rules (`Rack::MockRequest`)", "rack_ratekeeper_4_rules", "rack_ping_floor", "the app making one redis-rb PING a request, batches alternating", 1.3, "le"),
    ("Django middleware under gunicorn, `wrk` p50", "django_ratekeeper_p50", "django_none_p50", "no limiter", 1.3, "le"),
    ("Django: no limiter, one redis-py PING a request, the floor of any limiter that asks Redis, `wrk` p50 (for reference)", "django_ping_p50", "django_none_p50", "no limiter", None, "le"),
    ("Django middleware under gunicorn, `wrk` p50", "django_ratekeeper_p50", "django_ping_p50", "no limiter, one redis-py PING a request", 1.2, "le"),
    ("Django middleware under gunicorn, `wrk` p50", "django_ratekeeper_p50", "django_ratelimit_p50", "django-ratelimit, 4 stacked", 1.0, "le"),
    ("Django middleware under gunicorn, memory store, `wrk` p50 (the door without the round trip)", "django_ratekeeper_memory_p50", "django_none_p50", "no limiter", 1.3, "le"),
    ("a check against a full 100,000/day log", "rust_check_100000_per_day_full", "rust_check_10_per_second_full", "a full 10/second log", 1.2, "le"),
    ("a denied key hammered (in-process denial cache)", "rust_denied_cached", "rust_denied_round_trip", "the same denial from Redis", 20.0, "ge"),
    ("Python `check()`, 4 rules, admitted, the process recording denials", "py_check_4_rules_denials_recorded", "py_check_4_rules", "the same before any denial", 1.1, "le"),
    ("a flood of one denied key: writes to the denial record per second", "denial_record_writes_per_s", "denial_cache_periods_per_s", "one per denial-cache period (1 s)", 1.0, "le"),
    ("Redis CPU per check, 4 rules (`usec_per_call`)", "redis_usec_per_check_4_rules", "redis_usec_per_limits_hit_1_rule", "`limits` MovingWindow script, 1 rule", 1.0, "le"),
    ("memory store `check()` from Python, 1 rule", "py_memory_check_1_rule", "py_dict_lookup_and_time", "dict lookup + `time.time()`", 10.0, "le"),
    ("a weighted check, `\"2000000/minute\"` at cost 20,000, memory store, batches alternating", "py_weighted_memory_cost_20000", "py_weighted_memory_cost_1", "the same at cost 1", 1.2, "le"),
    ("a weighted check, `\"2000000/minute\"` at cost 20,000, Redis (script), batches alternating", "py_weighted_redis_cost_20000", "py_weighted_redis_cost_1", "the same at cost 1", 1.2, "le"),
    ("**module:** a weighted check, `\"2000000/minute\"` at cost 20,000, batches alternating", "py_weighted_module_cost_20000", "py_weighted_module_cost_1", "the same at cost 1", 1.2, "le"),
    ("a reservation and its settle (a refund), Redis (script), batches alternating", "py_metered_reserve_settle", "py_metered_check", "one check of the same rules", 2.1, "le"),
    ("**module:** a reservation and its settle (a refund), batches alternating", "py_metered_reserve_settle_module", "py_metered_check_module", "one check of the same rules", 2.1, "le"),
    ("a check of two meters (`requests`, `tokens`), Redis (script), batches alternating", "py_metered_two_meters", "py_metered_one_meter", "a check of one meter", 1.2, "le"),
    ("**module:** a check of two meters (`requests`, `tokens`), batches alternating", "py_metered_two_meters_module", "py_metered_one_meter_module", "a check of one meter", 1.2, "le"),
    ("a hold of `10 concurrent; 100000/minute` and its release, Redis (script), batches alternating", "py_in_flight_hold_release", "py_in_flight_check", "one check of `100000/minute`", 2.1, "le"),
    ("**module:** a hold and its release (`RATEKEEPER.HOLD`, `RATEKEEPER.LEASES`), batches alternating", "py_in_flight_hold_release_module", "py_in_flight_check_module", "one check of `100000/minute` (the module's command)", 2.1, "le"),
    ("a cost-1 check of 4 rules through the script, redis-py `EVALSHA`", "py_evalsha_current_script", "py_evalsha_previous_script", "the previous release's script (a timestamp per unit), batches alternating", 1.05, "le"),
    ("Redis CPU per cost-1 check of 4 rules through the script (`usec_per_call`)", "redis_usec_per_check_current_script", "redis_usec_per_check_previous_script", "the previous release's script, runs alternating", 1.05, "le"),
    ("FastAPI + ASGI middleware under uvicorn, `wrk -c32` p50", "fastapi_ratekeeper_p50", "fastapi_none_p50", "no limiter", 1.3, "le"),
    ("FastAPI + ASGI middleware, requests/s", "fastapi_ratekeeper_rps", "fastapi_slowapi_rps", "slowapi, moving window", 3.0, "more"),
    ("FastAPI + ASGI middleware, requests/s", "fastapi_ratekeeper_rps", "fastapi_fastapi_limiter_rps", "fastapi-limiter (pyrate-limiter Redis)", 2.0, "more"),
    ("FastAPI + ASGI middleware, requests/s (for reference)", "fastapi_ratekeeper_rps", "fastapi_none_rps", "no limiter", None, "more"),
    ("FastAPI + ASGI middleware, requests/s (for reference)", "fastapi_ratekeeper_rps", "fastapi_ratekeeper_no_headers_rps", "the same, `headers=\"none\"`", None, "more"),
    ("FastAPI + ASGI middleware on uvloop and httptools (`fastapi[standard]`), requests/s (for reference)", "fastapi_ratekeeper_std_rps", "fastapi_fastapi_limiter_std_rps", "fastapi-limiter, the same stack", None, "more"),
    ("FastAPI + ASGI middleware on uvloop and httptools, `wrk -c32` p50 (for reference)", "fastapi_ratekeeper_std_p50", "fastapi_none_std_p50", "no limiter, the same stack", None, "le"),
    ("`await acheck()` from one loop, 256 in flight, checks/s", "py_acheck_256_per_s", "py_check_16_threads_per_s", "blocking `check()` from 16 threads", None, "more"),
    # the same through the ratekeeper Redis module (a Redis of its own, with the module loaded)
    ("edge: `ratekeeper-server` forward auth, 4 rules on Redis, `wrk -c1` p50", "edge_forward_auth_c1_p50", "edge_tokio_ping_p50", "Redis PING from tokio (p50)", 1.5, "le"),
    ("**module:** edge forward auth, 4 rules, `wrk -c1` p50", "edge_forward_auth_module_c1_p50", "edge_tokio_ping_p50", "Redis PING from tokio (p50)", 1.5, "le"),
    ("edge: forward-auth decisions/s, 4 rules on Redis, `wrk -c32` (for reference)", "edge_forward_auth_rps", "edge_memory_rps", "the same server on the memory store", None, "more"),
    ("edge: forward auth p99, `wrk -c32` (for reference)", "edge_forward_auth_p99", "edge_forward_auth_p50", "its p50", None, "le"),
    ("edge: nginx + `auth_request` to the server, requests/s", "edge_nginx_auth_rps", "edge_nginx_static_rps", "nginx alone, the same static file", None, "more"),
    ("edge: nginx + `auth_request` to the server, p50", "edge_nginx_auth_p50", "edge_nginx_static_p50", "nginx alone, the same static file", None, "le"),
    ("edge: the server on the memory store, decisions/s", "edge_memory_rps", "edge_nginx_limit_req_rps", "nginx `limit_req` serving a static file", None, "more"),
    ("**module:** Redis CPU per check, 4 rules (`usec_per_call`)", "redis_usec_per_check_4_rules_module", "redis_usec_per_limits_hit_1_rule", "`limits` MovingWindow script, 1 rule", 0.2, "le"),
    ("**module:** Redis CPU per check, 4 rules (for reference)", "redis_usec_per_check_4_rules_module", "redis_usec_per_check_4_rules", "the script (the row above)", None, "le"),
    ("**module:** Redis time per check under a full pipeline (for reference)", "redis_usec_per_pipelined_check_module", "redis_usec_per_pipelined_check_script", "the script, same workload", None, "le"),
    ("**module:** checks one Redis core sustains (per CPU second, pipelined)", "redis_checks_per_cpu_second_module", "redis_checks_per_cpu_second_script", "the script, same workload", 5.0, "more"),
    ("**module:** Rust core `check()`, 4 rules", "rust_check_4_rules_module", "redis_benchmark_ping_p50", "redis-benchmark -c 1 PING (p50)", 1.3, "le"),
    ("**module:** Rust core `check()`, 4 rules (for reference)", "rust_check_4_rules_module", "rust_redis_rs_ping_paired", "redis-rs PING, same client, batches alternating", None, "le"),
    ("**module:** Python `check()`, 4 rules", "py_check_4_rules_module", "redis_py_ping", "redis-py PING", 1.0, "le"),
    ("**module:** Ruby `check()`, 4 rules", "rb_check_4_rules_module", "redis_rb_ping", "redis-rb PING, batches alternating", 1.0, "le"),
    ("**module:** Rack middleware, 4 rules (`Rack::MockRequest`)", "rack_ratekeeper_4_rules_module", "rack_attack_4_throttles", "rack-attack, 4 throttles, batches alternating", 8.0, "ge"),
    ("**module:** Rack middleware, 4 rules (`Rack::MockRequest`)", "rack_ratekeeper_4_rules_module", "rack_ping_floor", "the app making one redis-rb PING a request, batches alternating", 1.3, "le"),
    ("**module:** Django middleware under gunicorn, `wrk` p50", "django_ratekeeper_module_p50", "django_none_p50", "no limiter", 1.3, "le"),
    ("**module:** Django middleware under gunicorn, `wrk` p50", "django_ratekeeper_module_p50", "django_ping_p50", "no limiter, one redis-py PING a request", 1.2, "le"),
    ("**module:** FastAPI + ASGI middleware, `wrk -c32` p50", "fastapi_ratekeeper_module_p50", "fastapi_none_p50", "no limiter", 1.3, "le"),
    ("**module:** FastAPI + ASGI middleware, requests/s", "fastapi_ratekeeper_module_rps", "fastapi_fastapi_limiter_rps", "fastapi-limiter (pyrate-limiter Redis)", 2.0, "more"),
    ("**module:** Cluster, checks/s spread over 2 masters", "cluster_module_2_masters_per_s", "cluster_module_1_masters_per_s", "the same on 1 master", None, "more"),
    ("**module:** Cluster, checks/s spread over 3 masters", "cluster_module_3_masters_per_s", "cluster_module_1_masters_per_s", "the same on 1 master", None, "more"),
]


def load(path):
    results = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                record = json.loads(line)
                results[record["name"]] = record
    return results


def value(record):
    for field in ("median_ns", "usec", "p50_us", "per_s"):
        if field in record:
            return float(record[field])
    raise KeyError(record)


def shown(record):
    if "median_ns" in record:
        ns = record["median_ns"]
        return f"{ns / 1000:.1f} µs" if ns >= 1000 else f"{ns:.0f} ns"
    if "usec" in record:
        return f"{record['usec']:.1f} µs"
    if "per_s" in record:
        return f"{record['per_s']:,.0f}/s" if record["per_s"] >= 10 else f"{record['per_s']:.2f}/s"
    return f"{record['p50_us']:.0f} µs"


def table(results):
    lines = [
        "| what | ratekeeper | measured against | theirs | ratio | target | met |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for what, ours, theirs, against, target, kind in ROWS:
        if ours not in results or theirs not in results:
            lines.append(f"| {what} | – | {against} | – | – | – | not measured |")
            continue
        a, b = value(results[ours]), value(results[theirs])
        if kind == "more":  # a rate: more is better
            ratio = a / b
            goal, met = ("–", None) if target is None else (f"≥ {target}×", ratio >= target)
        elif target is None:  # for reference: "ge" rows say how many times faster
            ratio, goal, met = (b / a if kind == "ge" else a / b), "–", None
        elif kind == "le":
            ratio, goal = a / b, f"≤ {target}×"
            met = ratio <= target
        else:
            ratio, goal = b / a, f"≥ {target}× faster"
            met = ratio >= target
        lines.append(
            f"| {what} | {shown(results[ours])} | {against} | {shown(results[theirs])} | {ratio:.2f}× | {goal} | {'–' if met is None else 'yes' if met else '**no**'} |"
        )
    if "redis_memory_keys_x_60_units" in results:
        m = results["redis_memory_keys_x_60_units"]
        scaled = m["bytes"] * 100_000 / m["keys"]
        lines.append(
            f"| Redis memory, 100,000 keys × 60 units (`used_memory` delta) | {scaled / 1e6:.1f} MB"
            f" ({m['keys']:,} keys measured) | – | – | – | ≤ 60 MB | {'yes' if scaled <= 60e6 else '**no**'} |"
        )
    if "redis_bytes_weighted_key" in results:
        size = results["redis_bytes_weighted_key"]["bytes"]
        lines.append(f"| Redis bytes of one `\"2000000/minute\"` key after 100 checks of 20,000 (`MEMORY USAGE`) | {size:,} | – | – | – | ≤ 2,000 | {'yes' if size <= 2000 else '**no**'} |")
    if "redis_bytes_busy_key" in results:
        busy = results["redis_bytes_busy_key"]
        fine = busy["bytes"] <= 40_000
        lines.append(f"| Redis bytes of one `\"10/second; 1000/minute; 100000/day\"` key after {busy['calls']:,} calls (`MEMORY USAGE`) | {busy['bytes']:,} | – | – | – | ≤ 40,000 | {'yes' if fine else '**no**'} |")
    if "fastapi_ratekeeper_redis_commands_per_request" in results:
        per = results["fastapi_ratekeeper_redis_commands_per_request"]["ratio"]
        lines.append(f"| Redis round trips (scripts sent) per request, FastAPI + ASGI middleware | {per:.2f} | – | – | – | 1 | {'yes' if 0.99 < per < 1.05 else '**no**'} |")
    if "py_acheck_redis_busy" in results:
        busy = results["py_acheck_redis_busy"]
        lines.append(f"| Redis kept busy by one process's `acheck` (checks/s × {busy['usec_per_call']:.1f} µs per script) | {busy['ratio']:.2f} | – | – | – | ≥ 0.8 | {'yes' if busy['ratio'] >= 0.8 else '**no**'} |")
    if "redis_usec_per_check_4_rules_module" in results:
        usec = results["redis_usec_per_check_4_rules_module"]["usec"]
        lines.append(f"| **module:** Redis CPU per check, 4 rules, absolute | {usec:.2f} µs | – | – | – | ≤ 3 µs | {'yes' if usec <= 3 else '**no**'} |")
    if "redis_usec_per_pipelined_check_module" in results:
        usec = results["redis_usec_per_pipelined_check_module"]["usec"]
        lines.append(f"| **module:** Redis time per check under a full pipeline, 4 rules, absolute | {usec:.2f} µs | – | – | – | ≤ 2.5 µs | {'yes' if usec <= 2.5 else '**no**'} |")
    for name, shape in (("analyze_lines_per_cpu_s", "combined-format lines, 2 rule sets"),
                        ("analyze_query_lines_per_cpu_s", "combined-format lines with query strings, 2 rule sets (5 rules)")):
        if name not in results:
            continue
        run = results[name]
        fast, small = run["per_s"] >= 1_000_000, run["max_rss_mib"] <= 100
        what = f"`ratekeeper analyze`, {run['lines']:,} {shape.split(',')[0]}, {run['users']:,} users,{shape.split(',')[1]}"
        median = f" (median of {len(run['runs'])})" if len(run.get("runs", [])) > 1 else ""
        lines.append(f"| {what}: lines per CPU-second{median} | {run['per_s']:,} | – | – | – | ≥ 1,000,000 | {'yes' if fast else '**no**'} |")
        lines.append(f"| {what}: peak memory | {run['max_rss_mib']:.0f} MiB | – | – | – | ≤ 100 MiB | {'yes' if small else '**no**'} |")
    if "py_denied_cached_redis_calls" in results:
        calls = results["py_denied_cached_redis_calls"]["calls"]
        lines.append(f"| Redis calls while a denied key is hammered from Python | {calls} | – | – | – | 0 | {'yes' if calls == 0 else '**no**'} |")
    return "\n".join(lines)


def rounds(results, prefix, suffix, title, shown, ratios):
    """A wrk benchmark's modes (`prefix`MODE`suffix`) in each round (the
    table shows their medians), each value as `shown` writes it, and the
    ratio of each pair of `ratios` (ours, theirs) round by round."""
    modes = [(name[len(prefix):-len(suffix)], r["runs"]) for name, r in results.items()
             if name.startswith(prefix) and name.endswith(suffix) and "runs" in r]
    if not modes:
        return ""
    count = max(len(runs) for _, runs in modes)
    lines = [f"{title} in each round (the rows above are their medians):", "",
             "| mode | " + " | ".join(f"round {i + 1}" for i in range(count)) + " |",
             "| --- |" + " --- |" * count]
    lines += [f"| {mode} | " + " | ".join(shown(r) for r in runs) + " |" for mode, runs in modes]
    runs = dict(modes)
    for ours, theirs in ratios:
        if ours in runs and theirs in runs:
            pairs = zip(runs[ours], runs[theirs])
            lines.append(f"| {ours} ÷ {theirs} | " + " | ".join(f"{a / b:.2f}×" for a, b in pairs) + " |")
    return "\n".join(lines)


def every_round(results):
    """The rounds of the FastAPI and Django benchmarks (see `rounds`)."""
    parts = [
        rounds(results, "fastapi_", "_rps", "FastAPI requests/s", lambda r: f"{r:,.0f}",
               [("ratekeeper", "fastapi_limiter"), ("ratekeeper_module", "fastapi_limiter")]),
        rounds(results, "django_", "_p50", "Django `wrk` p50 (µs)", lambda r: f"{r:,.0f}",
               [("ratekeeper", "ping"), ("ratekeeper_module", "ping"), ("ratekeeper_memory", "none")]),
    ]
    return "\n\n".join(part for part in parts if part)


def main():
    results = load(sys.argv[1])
    text = table(results)
    each = every_round(results)
    if each:
        text += "\n\n" + each
    print(text)
    if "--write" in sys.argv:
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md")
        with open(path, "w") as f:
            f.write(f"# Benchmark results\n\n`bash bench/run`, {stamp}, on this project's 2-core machine; medians, Redis 7 on loopback.\n\n{text}\n")


if __name__ == "__main__":
    main()
