"""Proof of exactness under load: Python and Ruby processes, threads in each,
hammer a few keys on the same Redis (and on the Cluster) for seconds. With a
long window the admitted total per key is exactly the limit; with a short
window, the admitted log (timed by the Redis server) never holds more than
the limit inside any window."""

import collections
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, redis_targets, unique_prefix

KEYS = ["alpha", "beta", "gamma"]
SECONDS = 2.5


@pytest.mark.parametrize("name,url", redis_targets(), ids=[t[0] for t in redis_targets()])
def test_mixed_processes_never_admit_more_than_the_rules(name, url, redis_url):
    prefix = unique_prefix()
    load = os.path.join(ROOT, "tests", "load")
    args = [url, prefix, str(SECONDS), "4", *KEYS]
    workers = [
        subprocess.Popen([sys.executable, os.path.join(load, "hammer.py"), *args], stdout=subprocess.PIPE, text=True),
        subprocess.Popen([sys.executable, os.path.join(load, "hammer.py"), *args], stdout=subprocess.PIPE, text=True),
        subprocess.Popen(["ruby", os.path.join(load, "hammer.rb"), *args], stdout=subprocess.PIPE, text=True),
        subprocess.Popen(["ruby", os.path.join(load, "hammer.rb"), *args], stdout=subprocess.PIPE, text=True),
    ]
    records = []
    per_worker = []
    for worker in workers:
        out, _ = worker.communicate(timeout=60)
        assert worker.returncode == 0
        lines = [json.loads(line) for line in out.splitlines() if line.strip()]
        per_worker.append(len(lines))
        records.extend(lines)

    long_window = collections.Counter(r["key"] for r in records if r["rule"] == "long")
    assert long_window == {key: 40 for key in KEYS}, long_window

    short = collections.defaultdict(list)
    for r in records:
        if r["rule"] == "short":
            short[r["key"]].append(round(r["now"] * 1000))
    for key in KEYS:
        times = sorted(short[key])
        assert len(times) > 25, f"{key}: only {len(times)} admitted: the load did not reach the limit"
        start = 0
        for end, t in enumerate(times):
            while times[start] <= t - 1000:
                start += 1
            assert end - start + 1 <= 25, f"{key}: {end - start + 1} admitted in the second ending at {t} ms"
    print(f"{name}: admitted per worker {per_worker}; short-window admits per key {[len(short[k]) for k in KEYS]}")
