"""The Python half of the benchmark suite (bench/run runs it): ratekeeper
against redis-py's bare PING, `limits` (MovingWindow) and django-ratelimit,
the same workload on each (N checks spread over K keys, the same four rules),
and a few figures read off Redis itself. Prints JSON lines {"name", ...}.

    python3 bench/python_bench.py REDIS_URL N
"""

import json
import os
import statistics
import sys
import time

import redis

import ratekeeper

FOUR_RULES = "50/second; 1000/minute; 20000/hour; 100000/day"
DJANGO_RATES = ["50/s", "1000/m", "20000/h", "100000/d"]
KEYS = 1000
BATCH = 50


def report(name, **fields):
    print(json.dumps({"name": name, **fields}), flush=True)


def median_ns(n, call):
    """The median over batches of the mean time of one call."""
    for i in range(max(n // 10, 1)):
        call(i)
    samples = []
    for b in range(max(n // BATCH, 1)):
        start = time.perf_counter_ns()
        for i in range(b * BATCH, b * BATCH + BATCH):
            call(i)
        samples.append((time.perf_counter_ns() - start) / BATCH)
    return statistics.median(samples)


def evalsha_usec_per_call(r, n, call, runs=5):
    """Redis server time per EVALSHA (INFO commandstats) while `call(i)`
    runs `n` times, one call after another: the median of `runs` runs of
    n // runs calls, the stats reset before each (a stall of Redis's thread
    falls in one run rather than in the figure)."""
    per_run = []
    for run in range(runs):
        r.config_resetstat()
        for i in range(run * (n // runs), (run + 1) * (n // runs)):
            call(i)
        per_run.append(r.info("commandstats").get("cmdstat_evalsha", {}).get("usec_per_call", 0.0))
    return statistics.median(per_run)


def main():
    url, n = sys.argv[1], int(sys.argv[2])
    r = redis.Redis.from_url(url)
    keys = [f"user:{i}" for i in range(KEYS)]
    prefix = f"pybench-{os.getpid()}"

    report("redis_py_ping", median_ns=median_ns(n, lambda i: r.ping()))
    limiter = ratekeeper.Limiter(FOUR_RULES, url, prefix=prefix)

    def ours(i):
        assert limiter.check(keys[i % KEYS])

    report("py_check_4_rules", median_ns=median_ns(n, ours))
    if len(sys.argv) > 3:  # a Redis with the ratekeeper module loaded
        through_module = ratekeeper.Limiter(FOUR_RULES, sys.argv[3], prefix=prefix, redis_module="require")
        report("py_check_4_rules_module", median_ns=median_ns(n, lambda i: through_module.check(keys[i % KEYS])))
    report("redis_usec_per_check_4_rules", usec=evalsha_usec_per_call(r, n, ours))

    from limits import parse_many, storage, strategies

    moving = strategies.MovingWindowRateLimiter(storage.RedisStorage(url))
    items = parse_many(FOUR_RULES)

    def limits_hit_each(i):
        key = keys[i % KEYS]
        assert all([moving.hit(item, "bench", key) for item in items])

    report("limits_moving_window_4_rules", median_ns=median_ns(n, limits_hit_each))
    one = items[-1]
    report(
        "redis_usec_per_limits_hit_1_rule",
        usec=evalsha_usec_per_call(r, n, lambda i: moving.hit(one, "bench-one", keys[i % KEYS])),
    )

    import django
    from django.conf import settings

    settings.configure(
        CACHES={"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url}},
        RATELIMIT_USE_CACHE="default",
        SECRET_KEY="bench",
    )
    django.setup()
    from django.test import RequestFactory
    from django_ratelimit.core import is_ratelimited

    factory = RequestFactory()
    requests = [factory.get("/", REMOTE_ADDR=f"10.0.{i // 256}.{i % 256}") for i in range(KEYS)]

    def django_ratelimit_4(i):
        request = requests[i % KEYS]
        for rate in DJANGO_RATES:
            assert not is_ratelimited(request, group=f"bench-{rate}", key="ip", rate=rate, increment=True)

    report("django_ratelimit_4_rules", median_ns=median_ns(n, django_ratelimit_4))

    memory = ratekeeper.Limiter("1000000/second")
    report("py_memory_check_1_rule", median_ns=median_ns(n * 5, lambda i: memory.check(keys[i % KEYS])))
    table = {key: i for i, key in enumerate(keys)}
    report("py_dict_lookup_and_time", median_ns=median_ns(n * 5, lambda i: (table.get(keys[i % KEYS]), time.time())))

    denied = ratekeeper.Limiter("1/hour", url, prefix=prefix + "-denied")
    denied.check("hammer")
    denied.check("hammer")
    attempts = denied.store_stats["attempts"]
    report("py_denied_cached", median_ns=median_ns(n, lambda i: denied.check("hammer")))
    report("py_denied_cached_redis_calls", calls=denied.store_stats["attempts"] - attempts)

    denial_record(url, r, n, limiter, keys, prefix)

    # 100,000 keys x 60 logged units, by INFO used_memory
    before = r.info("memory")["used_memory"]
    units = ratekeeper.Limiter(FOUR_RULES, url, prefix=prefix + "-mem")
    scale = 100_000 if n >= 10_000 else 2_000
    many = [f"member:{i}" for i in range(scale)]
    for start in range(0, scale, 1000):
        chunk = many[start : start + 1000]
        for step in range(2):  # 2 x 30 units, 2 s apart: 60 units under 50/second
            assert all(units.check_many(chunk, 30, now=1_700_000_000.0 + 2 * step))
    after = r.info("memory")["used_memory"]
    report("redis_memory_keys_x_60_units", keys=scale, bytes=after - before)

    weighted(url, r, n, prefix, sys.argv[3] if len(sys.argv) > 3 else None)
    metered(url, n, prefix, "")
    holds(url, n, prefix, "")
    if len(sys.argv) > 3:
        metered(sys.argv[3], n, prefix, "_module")
        holds(sys.argv[3], n, prefix, "_module")


WEIGHTED = "2000000/minute"
BUSY = "10/second; 1000/minute; 100000/day"
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
PREVIOUS_SCRIPT = os.path.join(ROOT, "tests", "cases", "previous", "check.lua")


def current_script():
    """This release's check script: the engine's Lua files, joined as
    engine/src/lib.rs joins them."""
    parts = []
    for name in ("bands.lua", "log.lua", "check.lua"):
        with open(os.path.join(ROOT, "engine", "lua", name)) as f:
            parts.append(f.read())
    return "".join(parts)


def script_args(rules_text, cost):
    """A check's ARGV as the check script takes it (c, cost, now from the
    server clock, the rules: count, windows as stored, limits, windows)."""
    pairs = [(int(limit), window) for limit, window in
             ((part.split("/")[0], {"second": 1000, "minute": 60_000, "hour": 3_600_000, "day": 86_400_000}[part.split("/")[1]])
              for part in (p.strip() for p in rules_text.split(";")))]
    windows = b"".join(w.to_bytes(5, "big") for _, w in pairs)
    return ["c", cost, "", len(pairs), windows, *[l for l, _ in pairs], *[w for _, w in pairs]]


def weighted(url, r, n, prefix, module_url):
    """What a weighted check costs: `"2000000/minute"` checked at cost 20,000
    and at cost 1 (memory, the script, the module), the Redis bytes of one
    such key after 100 checks of 20,000, a busy key of three rules after
    100,000 calls, and a cost-1 check through this release's script against
    the previous release's (format 4: a timestamp per unit)."""
    keys = [f"w:{i}" for i in range(KEYS)]
    stores = [("memory", None), ("redis", url)] + ([("module", module_url)] if module_url else [])
    for name, store in stores:
        limiters = {}
        for cost in (1, 20_000):
            options = {} if store is None else {"prefix": f"{prefix}-w{cost}"}
            if name == "module":
                options["redis_module"] = "require"
            limiters[cost] = ratekeeper.Limiter(WEIGHTED, store, **options) if store else ratekeeper.Limiter(WEIGHTED)
        # batches alternating: a machine whose speed drifts slows both alike
        checks = {cost: (lambda i, cost=cost: limiters[cost].check(keys[i % KEYS], cost)) for cost in limiters}
        for cost, per_call in paired(n, checks).items():
            report(f"py_weighted_{name}_cost_{cost}", median_ns=per_call)

    start = 1_700_000_000.0
    one = ratekeeper.Limiter(WEIGHTED, url, prefix=f"{prefix}-wkey")
    for i in range(100):
        assert one.check("tokens", 20_000, now=start + i * 0.5)
    log = f"{prefix}-wkey:{{tokens}}:l"
    report("redis_bytes_weighted_key", bytes=r.memory_usage(log, samples=0))

    busy = ratekeeper.Limiter(BUSY, url, prefix=f"{prefix}-busy")
    calls = 100_000 if n >= 10_000 else 5_000
    for i in range(calls):
        busy.check("busy", now=start + i * 0.1)
    report("redis_bytes_busy_key", bytes=r.memory_usage(f"{prefix}-busy:{{busy}}:l", samples=0), calls=calls)

    # a cost-1 check of four rules through each release's script, one key
    # each per call, EVALSHA from redis-py alike
    with open(PREVIOUS_SCRIPT) as f:
        previous = r.script_load(f.read())
    current = r.script_load(current_script())
    args = script_args(FOUR_RULES, 1)
    calls = {name: (lambda i, sha=sha, name=name: r.evalsha(sha, 1, f"{prefix}-{name}:{{{keys[i % KEYS]}}}:l", *args))
             for name, sha in (("previous", previous), ("current", current))}
    for name, per_call in paired(n, calls).items():
        report(f"py_evalsha_{name}_script", median_ns=per_call)
    for name, usec in paired_usec_per_call(r, n, calls).items():
        report(f"redis_usec_per_check_{name}_script", usec=usec)


def metered(url, n, prefix, via):
    """What reservations and meters cost on Redis (`via` "": the script,
    "_module": the module's commands), batches alternating: a reservation
    and its settle (which gives units back) against one check of the same
    rules; a check of two meters against one of one meter."""
    keys = [f"m:{i}" for i in range(KEYS)]
    options = {"prefix": f"{prefix}-m{via}", "redis_module": "require" if via else "off"}
    plain = ratekeeper.Limiter(WEIGHTED, url, scope="plain", **options)
    reserving = ratekeeper.Limiter(WEIGHTED, url, scope="reserving", **options)
    one = ratekeeper.Limiter({"tokens": WEIGHTED}, url, scope="one", **options)
    two = ratekeeper.Limiter({"requests": "3500/minute", "tokens": WEIGHTED}, url, scope="two", **options)

    def reserve_and_settle(i):
        reserving.reserve(keys[i % KEYS], 2000).settle(1234)

    times = paired(n, {
        "check": lambda i: plain.check(keys[i % KEYS], 2000),
        "reserve_settle": reserve_and_settle,
        "one_meter": lambda i: one.check(keys[i % KEYS], {"tokens": 1500}),
        "two_meters": lambda i: two.check(keys[i % KEYS], {"requests": 1, "tokens": 1500}),
    })
    for name, per_call in times.items():
        report(f"py_metered_{name}{via}", median_ns=per_call)


def holds(url, n, prefix, via):
    """What a hold of an in-flight rule costs on Redis (`via` "": the
    script, "_module": a Redis with the module, whose RATEKEEPER.HOLD and
    RATEKEEPER.LEASES hold and release), batches alternating: a hold of "10 concurrent;
    100000/minute" and its release against one check of "100000/minute"."""
    keys = [f"h:{i}" for i in range(KEYS)]
    options = {"prefix": f"{prefix}-h{via}", "redis_module": "require" if via else "off"}
    plain = ratekeeper.Limiter("100000/minute", url, scope="plain", **options)
    holding = ratekeeper.Limiter("10 concurrent; 100000/minute", url, scope="holding", **options)

    def hold_and_release(i):
        holding.hold(keys[i % KEYS]).release()

    times = paired(n, {"check": lambda i: plain.check(keys[i % KEYS]), "hold_release": hold_and_release})
    for name, per_call in times.items():
        report(f"py_in_flight_{name}{via}", median_ns=per_call)


def paired(n, calls):
    """Each call's time in batches that alternate between `calls` (a name
    to a call of `i`), so that a machine whose speed drifts during the run
    slows every one of them alike: the median over its batches of the mean
    time of one call, by name."""
    for call in calls.values():
        for i in range(max(n // 10, 1)):
            call(i)
    samples = {name: [] for name in calls}
    for b in range(max(n // BATCH, 1)):
        for name, call in calls.items():
            start = time.perf_counter_ns()
            for i in range(b * BATCH, b * BATCH + BATCH):
                call(i)
            samples[name].append((time.perf_counter_ns() - start) / BATCH)
    return {name: statistics.median(s) for name, s in samples.items()}


def paired_usec_per_call(r, n, calls, runs=9):
    """Redis server time per EVALSHA (INFO commandstats) of each of
    `calls`, in runs of n // runs calls that alternate between them (the
    stats reset before each): the median of its runs, by name."""
    per_run = {name: [] for name in calls}
    for run in range(runs):
        for name, call in calls.items():
            r.config_resetstat()
            for i in range(run * (n // runs), (run + 1) * (n // runs)):
                call(i)
            per_run[name].append(r.info("commandstats").get("cmdstat_evalsha", {}).get("usec_per_call", 0.0))
    return {name: statistics.median(v) for name, v in per_run.items()}


def denial_record(url, r, n, limiter, keys, prefix):
    """What the record of who is limited costs: an admitted check by the
    limiter of py_check_4_rules once its process has denials to record (the
    same checks, timed again), and the writes to the store while one key is
    denied as fast as one thread can ask, against one per denial-cache
    period (its default, 1 s)."""
    flooded = limiter.with_rules("1/hour", scope="bench-flood")
    flooded.check("flood")
    assert not flooded.check("flood")
    report("py_check_4_rules_denials_recorded", median_ns=median_ns(n, lambda i: limiter.check(keys[i % KEYS])))
    seconds = 4.0 if n >= 5000 else 1.0
    r.config_resetstat()
    denials = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for _ in range(100):
            flooded.check("flood")
        denials += 100
    writes = r.info("commandstats").get("cmdstat_hset", {}).get("calls", 0)
    report("denial_record_writes_per_s", per_s=writes / seconds, denials=denials)
    report("denial_cache_periods_per_s", per_s=1.0)
    # the tally reaches the store when the process's policy reader next runs
    # (every controls_refresh, 2 s): a short (smoke) flood may end before it
    admin = ratekeeper.Admin(url, prefix=prefix)
    top = admin.top_denied(window=300)
    give_up = time.monotonic() + 10
    while not top["keys"] and time.monotonic() < give_up:
        time.sleep(0.2)
        top = admin.top_denied(window=300)
    assert top["keys"] and top["keys"][0]["key"] == "flood", top


if __name__ == "__main__":
    main()
