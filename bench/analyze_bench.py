"""`ratekeeper analyze` on a large log: lines per CPU-second and peak memory.

    python3 bench/analyze_bench.py [--lines 1000000] [--users 20000] [--gzip] [--query] [--runs 5]

Writes a combined-format log of one day (``--users`` clients, a few of them
bursty, lines up to 3 s out of order, from a fixed seed) into a temporary
directory, runs ``python3 -m ratekeeper analyze`` on it with two rule sets,
and prints one JSON line for bench/report.py (``analyze_lines_per_cpu_s``,
``analyze_query_lines_per_cpu_s`` with ``--query``): lines per CPU-second
(user + system of the child), CPU and wall seconds and the child's peak RSS
in MiB, the median of ``--runs`` runs (each run's lines per CPU-second in
``runs``: a shared machine's speed drifts). ``--query`` gives every line a
query string (a search, a page, a session token: about 140 bytes a line) and checks the rules
``3/second; 30/minute`` against a candidate of three rules, a day's among
them.
"""

import argparse
import datetime
import gzip
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time

SEED = 28
DAY_START = datetime.datetime(2024, 3, 5, tzinfo=datetime.timezone.utc).timestamp()
RULES = "10/second; 300/hour"
CANDIDATE = "20/second; 600/hour"
QUERY_RULES = "3/second; 30/minute"
QUERY_CANDIDATES = "10/second; 60/minute; 1000/day"


def write_log(path: str, lines: int, users: int, zipped: bool, query: bool = False) -> None:
    """A day of ``lines`` requests from ``users`` clients (see the module doc)."""
    rng = random.Random(SEED)
    step = 86400.0 / lines
    opener = gzip.open if zipped else open
    stamps: dict = {}
    with opener(path, "wt", encoding="utf-8") as out:  # type: ignore[operator]
        at = DAY_START
        burst_user, burst_left = 0, 0
        for i in range(lines):
            at += rng.expovariate(1.0 / step)
            if burst_left == 0 and rng.random() < 0.001:
                burst_user, burst_left = rng.randrange(users), rng.randint(20, 400)
            if burst_left:
                user, burst_left = burst_user, burst_left - 1
            else:
                user = rng.randrange(users)
            written = at - rng.uniform(0, 3)
            second = int(written)
            stamp = stamps.get(second)
            if stamp is None:
                stamps.clear()
                moment = datetime.datetime.fromtimestamp(second, datetime.timezone.utc)
                stamp = stamps[second] = moment.strftime("%d/%b/%Y:%H:%M:%S +0000")
            ip = f"10.{user >> 16}.{(user >> 8) & 255}.{user & 255}"
            who = f"u{user}" if user % 3 == 0 else "-"
            target = (f"/search?q=item{i % 997}&page={i % 13}&sort=price&session={user * 7919:08x}{i % 251:02x}"
                      if query else f"/items/{i % 997}")
            out.write(f'{ip} - {who} [{stamp}] "GET {target} HTTP/1.1" 200 {512 + i % 4096} "-" "bench/1.0"\n')


def run(path: str, query: bool = False) -> dict:
    """Runs ``analyze`` on ``path`` in a child and measures it."""
    rules, candidates = (QUERY_RULES, QUERY_CANDIDATES) if query else (RULES, CANDIDATE)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "ratekeeper", "analyze", path, "--rules", rules, "--candidates", candidates,
         "--json", "--no-progress"],
        check=True, capture_output=True, text=True,
    )
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    report = json.loads(done.stdout)
    return {
        "name": "analyze_query_lines_per_cpu_s" if query else "analyze_lines_per_cpu_s",
        "per_s": round(report["lines"] / cpu),
        "lines": report["lines"],
        "users": report["users"],
        "cpu_s": round(cpu, 3),
        "wall_s": round(wall, 3),
        "max_rss_mib": round(after.ru_maxrss / 1024, 1),
        "denied": [c["denied_requests"] for c in report["candidates"]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=20_000)
    parser.add_argument("--gzip", action="store_true")
    parser.add_argument("--query", action="store_true", help="lines with query strings; a candidate of three rules")
    parser.add_argument("--runs", type=int, default=5, help="runs of analyze; the median is reported")
    parser.add_argument("--keep", metavar="PATH", help="write the log here and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or os.path.join(tmp, "access.log" + (".gz" if args.gzip else ""))
        write_log(path, args.lines, args.users, args.gzip, args.query)
        results = sorted((run(path, args.query) for _ in range(max(1, args.runs))), key=lambda r: r["per_s"])
        result = dict(results[len(results) // 2], runs=[r["per_s"] for r in results])
        result["bytes"] = os.path.getsize(path)
        result["gzip"] = args.gzip
        print(json.dumps(result))


if __name__ == "__main__":
    main()
