"""A short-lived process's denials reach the record (Admin.top_denied) when
it exits before the periodic write (controls_refresh, 60 s here): a Python
script (atexit), a multiprocessing child and a Celery-style billiard child
(os._exit), a Ruby script and a forked Ruby child (at_exit), the edge
server stopped by SIGTERM."""

import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

import ratekeeper
from conftest import ROOT, unique_prefix

# 30 denials of one key, then 4 from each of 20 addresses of one /24
PYTHON = """
import sys, ratekeeper
limiter = ratekeeper.Limiter("1/minute", sys.argv[1], prefix=sys.argv[2], scope="exit", controls_refresh=60)
for _ in range(31):
    limiter.check("victim")
for n in range(20):
    for _ in range(5):
        limiter.check(f"client-{n}", ip=f"198.51.100.{n + 1}")
"""
CHILD = """
import multiprocessing, os, sys, ratekeeper
def work(store, prefix):
""" + "\n".join("    " + line for line in PYTHON.strip().splitlines()[1:]).replace("sys.argv[1]", "store").replace(
    "sys.argv[2]", "prefix") + """
if __name__ == "__main__":
    import billiard
    context = multiprocessing.get_context("fork") if sys.argv[3] == "multiprocessing" else billiard.get_context("fork")
    child = context.Process(target=work, args=(sys.argv[1], sys.argv[2]))
    child.start()
    child.join(30)
    assert child.exitcode == 0, child.exitcode
    os._exit(0)  # the parent writes nothing of its own: only the child's write counts
"""
RUBY = """
require "ratekeeper"
limiter = Ratekeeper::Limiter.new("1/minute", store: ARGV[0], prefix: ARGV[1], scope: "exit", controls_refresh: 60)
31.times { limiter.check("victim") }
20.times { |n| 5.times { limiter.check("client-#{n}", ip: "198.51.100.#{n + 1}") } }
"""


def recorded(store: str, prefix: str):
    """The top keys and networks read from this process, as soon as the
    record holds all 110 denials (or after 3 s)."""
    admin = ratekeeper.Admin(store, prefix=prefix)
    deadline = time.monotonic() + 3
    while True:
        top = admin.top_denied(window=300)
        if sum(k["count"] for k in top["keys"]) >= 110 or time.monotonic() > deadline:
            return {k["key"]: k["count"] for k in top["keys"]}, {n["network"]: n["count"] for n in top["networks"]}


def assert_all_recorded(store: str, prefix: str) -> None:
    keys, networks = recorded(store, prefix)
    assert keys.get("victim") == 30, keys
    assert sum(count for key, count in keys.items() if key.startswith("client-")) == 80, keys
    assert networks.get("198.51.100.0/24") == 80, networks


@pytest.mark.parametrize("how", ["script", "multiprocessing", "billiard"])
def test_a_python_process_writes_its_denials_as_it_exits(how, redis_url):
    prefix = unique_prefix()
    if how == "script":
        command = [sys.executable, "-c", PYTHON, redis_url, prefix]
    else:
        command = [sys.executable, "-c", CHILD, redis_url, prefix, how]
    run = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]
    assert_all_recorded(redis_url, prefix)


@pytest.mark.parametrize("how", ["script", "fork"])
def test_a_ruby_process_writes_its_denials_as_it_exits(how, redis_url):
    ruby = shutil.which("ruby")
    if ruby is None:
        pytest.skip("no ruby")
    prefix = unique_prefix()
    env = {**os.environ, "RUBYLIB": os.pathsep.join(filter(None, [os.path.join(ROOT, "ruby", "lib"),
                                                                   os.environ.get("RUBYLIB")]))}
    # a forked child's denials: the parent leaves by exit!, writing nothing of its own
    script = RUBY if how == "script" else f"require 'ratekeeper'\nProcess.wait(fork {{\n{RUBY}\n}})\nexit!(0)\n"
    run = subprocess.run([ruby, "-e", script, redis_url, prefix], capture_output=True, text=True, timeout=60, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    assert_all_recorded(redis_url, prefix)


def test_the_edge_server_writes_its_denials_as_it_stops(redis_url, tmp_path):
    from edge import EdgeServer

    prefix = unique_prefix()
    policy = f"""
[store]
prefix = "{prefix}"
controls_refresh = 60
[[throttle]]
scope = "exit"
rules = "1/minute"
key = "header:X-Key"
"""
    server = EdgeServer(tmp_path, policy, store=redis_url)
    try:
        for n in range(4):
            request = urllib.request.Request(f"http://127.0.0.1:{server.port}/nginx",
                                             headers={"X-Original-URI": "/", "X-Key": "victim"})
            try:
                urllib.request.urlopen(request, timeout=10).read()
            except urllib.error.HTTPError as denied:
                assert denied.code in (401, 429) and n > 0  # (nginx turns a 401 into the 429 it is told to)
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=20) == 0
    finally:
        server.stop()
    keys, _ = recorded(redis_url, prefix)
    assert keys.get("victim") == 3, keys


def test_with_redis_frozen_the_write_at_exit_waits_one_timeout(own_redis):
    """A process exiting while Redis is frozen waits for the record at most
    its `timeout` (0.25 s), then exits."""
    port, pid = own_redis
    script = PYTHON.replace('controls_refresh=60)', 'controls_refresh=60, timeout=0.25)') + "print('ready', flush=True)\nsys.stdin.readline()\n"
    child = subprocess.Popen([sys.executable, "-c", script, f"redis://127.0.0.1:{port}/0", unique_prefix()],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        os.kill(pid, signal.SIGSTOP)
        started = time.monotonic()
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.wait(timeout=30) == 0
        took = time.monotonic() - started
    finally:
        os.kill(pid, signal.SIGCONT)
        if child.poll() is None:
            child.kill()
    print(f"exit with Redis frozen: {took * 1000:.0f} ms")
    assert took < 0.25 + 0.5, f"the exit waited {took:.2f} s on a frozen Redis"
