"""A Limiter built (and used) before a fork keeps limiting in every child:
gunicorn with and without --preload, over real HTTP, and multiprocessing's
fork start method. No check fails open, and a key's quota is exact across
all the processes."""

import json
import multiprocessing
import os
import subprocess
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import ROOT, free_port, unique_prefix, wait_for_http
from ratekeeper import Limiter

SERVERS = os.path.join(ROOT, "tests", "python", "servers")


def fetch(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


@pytest.mark.parametrize("preload", [True, False], ids=["preload", "no-preload"])
def test_gunicorn_workers_limit_exactly(redis_url, tmp_path, preload):
    port = free_port()
    env = {**os.environ, "RK_STORE": redis_url, "RK_PREFIX": unique_prefix(), "RK_RULES": "50/minute"}
    args = [sys.executable, "-m", "gunicorn", "-w", "2", "--threads", "4", "-b", f"127.0.0.1:{port}",
            "--chdir", SERVERS, "--log-level", "warning"]
    if preload:
        args.append("--preload")
    log = open(tmp_path / "gunicorn.log", "w")
    server = subprocess.Popen([*args, "preforked_wsgi:app"], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_http(f"http://127.0.0.1:{port}/warm", process=server)
        urls = [f"http://127.0.0.1:{port}/hot"] * 200 + [f"http://127.0.0.1:{port}/key-{i}" for i in range(600)]
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(fetch, urls))
    finally:
        server.terminate()
        server.wait(timeout=20)
        log.close()
    degraded = [a for a in answers if a["degraded"]]
    hot = answers[:200]
    pids = {a["pid"] for a in answers}
    assert not degraded, f"{len(degraded)} of {len(answers)} checks failed open: {open(tmp_path / 'gunicorn.log').read()}"
    assert sum(a["allowed"] for a in hot) == 50, "a 50/minute key admits exactly 50 across both workers"
    assert all(a["allowed"] for a in answers[200:]), "every other key has its own quota"
    assert len(pids) == 2, f"both workers should have answered, saw {pids}"


def _child_checks(limiter: Limiter, count: int, queue) -> None:
    outcomes = [limiter.check("shared") for _ in range(count)]
    queue.put((os.getpid(), sum(d.allowed for d in outcomes), sum(d.degraded for d in outcomes),
               limiter.store_stats["failures"]))


def test_multiprocessing_fork_children_share_the_quota_exactly(redis_url):
    limiter = Limiter("30/minute", redis_url, prefix=unique_prefix())
    # the parent opens its pool (and the pool's threads) before forking
    assert not limiter.check("parent").degraded
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    children = [context.Process(target=_child_checks, args=(limiter, 25, queue)) for _ in range(4)]
    for child in children:
        child.start()
    results = [queue.get(timeout=30) for _ in children]
    for child in children:
        child.join(timeout=30)
        assert child.exitcode == 0
    assert sum(degraded for _, _, degraded, _ in results) == 0, results
    assert sum(failures for _, _, _, failures in results) == 0, results
    assert sum(allowed for _, allowed, _, _ in results) == 30, results
    # and the parent's own connections still answer it, not a child
    assert not limiter.check("parent").degraded
    assert limiter.peek("shared").remaining == 0
