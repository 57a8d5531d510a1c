"""Background jobs limited by ratekeeper: a real Celery worker (Redis
broker, 8 threads) runs 200 tasks limited to 20/second: all complete, each
once, none failed, never more than 20 in any second by the Redis clock.
(Sidekiq: tests/ruby/test_sidekiq.rb.)"""

import os
import re
import subprocess
import sys
import time

import pytest
import redis

import documentation
from conftest import ROOT, unique_prefix

JOBS = os.path.join(ROOT, "examples", "jobs")


def test_200_partner_celery_at_20_per_second(own_redis, tmp_path):
    pytest.importorskip("celery")
    port, _ = own_redis
    store = f"redis://127.0.0.1:{port}/0"
    env = {**os.environ, "RK_BROKER": f"redis://127.0.0.1:{port}/1", "RK_STORE": store, "RK_RULES": "20/second",
           "RK_PREFIX": unique_prefix(), "RK_RUNS": "runs", "PYTHONPATH": JOBS}
    env.pop("DJANGO_SETTINGS_MODULE", None)  # not a Django worker (Celery would load the settings)
    log = open(tmp_path / "celery.log", "w")
    worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "partner_celery", "worker", "-P", "threads",
                               "-c", "8", "--loglevel", "INFO", "--without-gossip", "--without-mingle"],
                              env=env, stdout=log, stderr=subprocess.STDOUT, cwd=JOBS)
    try:
        sys.path.insert(0, JOBS)
        os.environ.update({k: v for k, v in env.items() if k.startswith("RK_")})
        import partner_celery

        for n in range(200):
            partner_celery.partner.delay(n)
        client = redis.Redis.from_url(store)
        deadline = time.monotonic() + 60
        while client.llen("runs") < 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        runs = [tuple(int(x) for x in r.split(b":")) for r in client.lrange("runs", 0, -1)]
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        log.close()
        sys.path.remove(JOBS)
    text = (tmp_path / "celery.log").read_text()
    assert len(runs) == 200, f"{len(runs)} of 200 ran: {text[-3000:]}"
    assert sorted(n for _, n in runs) == list(range(200)), "each task once"
    times = sorted(t for t, _ in runs)
    for i in range(len(times) - 20):
        assert times[i + 20] - times[i] >= 1000, f"21 tasks within a second: {times[i:i + 21]}"
    assert "raised unexpected" not in text and "Retry in" not in text, text[-3000:]
    print(f"200 tasks at 20/second: the last ran {(times[-1] - times[0]) / 1000} s after the first (ideal 9.0 s)")


def test_the_readme_shows_the_job_examples_as_they_are():
    from pathlib import Path

    readme = documentation.text()
    blocks = [b.strip() for b in re.findall(r"```(?:python|ruby)\n(.*?)```", readme, re.S)]
    for name in ("partner_sidekiq.rb", "partner_celery.py"):
        assert Path(JOBS, name).read_text().strip() in blocks, f"README should show examples/jobs/{name} as it is"
