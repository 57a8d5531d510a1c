"""Awaited checks from one event loop (256 in flight) beside blocking checks
from 16 threads, each for SECONDS, against one local Redis; and how busy
that keeps Redis: checks per second x the script's usec_per_call (INFO
commandstats) / 1e6, where 1.0 is Redis' one core never idle.

    python3 bench/async_bench.py REDIS_URL SECONDS

Prints JSON lines: py_acheck_256_per_s, py_check_16_threads_per_s,
py_acheck_redis_busy.
"""

import asyncio
import json
import sys
import threading
import time

import redis

import ratekeeper

FOUR_RULES = "1000000/second; 10000000/minute; 10000000/hour; 10000000/day"


def script_stats(client: redis.Redis) -> tuple:
    stats = client.info("commandstats").get("cmdstat_evalsha", {})
    return stats.get("calls", 0), stats.get("usec", 0)


async def awaited(limiter: ratekeeper.Limiter, seconds: float, in_flight: int) -> int:
    done = 0
    deadline = time.monotonic() + seconds

    async def worker(n: int) -> None:
        nonlocal done
        i = 0
        while time.monotonic() < deadline:
            await limiter.acheck(f"a{n}:{i % 1000}")
            done += 1
            i += 1

    await asyncio.gather(*(worker(n) for n in range(in_flight)))
    return done


def blocking(limiter: ratekeeper.Limiter, seconds: float, threads: int) -> int:
    counts = [0] * threads
    deadline = time.monotonic() + seconds

    def worker(n: int) -> None:
        i = 0
        while time.monotonic() < deadline:
            limiter.check(f"b{n}:{i % 1000}")
            counts[n] += 1
            i += 1

    started = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for t in started:
        t.start()
    for t in started:
        t.join()
    return sum(counts)


def main() -> None:
    url, seconds = sys.argv[1], float(sys.argv[2])
    client = redis.Redis.from_url(url)
    limiter = ratekeeper.Limiter(FOUR_RULES, url, prefix=f"asyncbench-{time.time_ns()}", controls=False)
    asyncio.run(awaited(limiter, 0.2, 8))  # warm: connection, script, policy view
    calls0, usec0 = script_stats(client)
    started = time.monotonic()
    count = asyncio.run(awaited(limiter, seconds, 256))
    elapsed = time.monotonic() - started
    calls1, usec1 = script_stats(client)
    per_s = count / elapsed
    usec_per_call = (usec1 - usec0) / max(1, calls1 - calls0)
    print(json.dumps({"name": "py_acheck_256_per_s", "per_s": per_s}))
    print(json.dumps({"name": "py_acheck_redis_busy", "ratio": per_s * usec_per_call / 1e6,
                      "usec_per_call": usec_per_call}))
    started = time.monotonic()
    count = blocking(limiter, seconds, 16)
    print(json.dumps({"name": "py_check_16_threads_per_s", "per_s": count / (time.monotonic() - started)}))


if __name__ == "__main__":
    main()
