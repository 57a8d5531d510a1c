"""A frozen Redis (SIGSTOP) under real servers: the WSGI middleware under
gunicorn (4 threads, blocking checks), the ASGI middleware under uvicorn
(awaited checks) and the Rack middleware under puma (4 threads), hammered
by 4 clients each while Redis is frozen: every answer is decided within
ONE `timeout` (plus 50 ms), never a timeout for a new connection's setup
and another for the command."""

import os
import signal
import sys
import threading
import time
import urllib.request

import pytest

from conftest import ROOT, free_port, http_servers, unique_prefix

SERVERS = os.path.join(ROOT, "tests", "python", "servers")
RUBY_SERVERS = os.path.join(ROOT, "tests", "ruby", "servers")
TIMEOUT = 0.25
BOUND_MS = (TIMEOUT + 0.05) * 1000


def took(url: str):
    """(middleware ms, client ms) of one GET."""
    started = time.monotonic()
    with urllib.request.urlopen(url, timeout=10) as response:
        response.read()
        return float(response.headers["X-Took-Ms"]), (time.monotonic() - started) * 1000


@pytest.fixture
def servers(own_redis, tmp_path):
    port, pid = own_redis
    env = {**os.environ, "RK_STORE": f"redis://127.0.0.1:{port}/0", "RK_PREFIX": unique_prefix(),
           "RK_TIMEOUT": str(TIMEOUT)}
    ports = {name: free_port() for name in ("gunicorn", "uvicorn", "puma")}
    commands = {
        "gunicorn": [sys.executable, "-m", "gunicorn", "-w", "1", "--threads", "4", "--chdir", SERVERS,
                     "--log-level", "warning", "-b", f"127.0.0.1:{ports['gunicorn']}", "frozen_wsgi:app"],
        "uvicorn": [sys.executable, "-m", "uvicorn", "--app-dir", SERVERS, "--log-level", "warning",
                    "--port", str(ports["uvicorn"]), "frozen_asgi:app"],
        "puma": ["puma", "-q", "-t", "4:4", "-b", f"tcp://127.0.0.1:{ports['puma']}",
                 os.path.join(RUBY_SERVERS, "frozen.ru")],
    }
    try:
        with http_servers(commands, ports, env, tmp_path) as urls:
            yield {name: f"{url}/" for name, url in urls.items()}, pid
    finally:
        os.kill(pid, signal.SIGCONT)


def test_every_answer_with_redis_frozen_comes_within_one_timeout(servers):
    urls, pid = servers
    for url in urls.values():
        for _ in range(5):  # connections made, the script loaded
            took(url)
    seen = {name: [] for name in urls}
    failures = []

    def client(name: str, url: str) -> None:
        for _ in range(3):
            try:
                seen[name].append(took(url))
            except Exception as exc:  # noqa: BLE001 - counted, shown below
                failures.append(f"{name}: {exc!r}")

    for name, url in urls.items():  # one server at a time, as each is deployed alone
        os.kill(pid, signal.SIGSTOP)
        try:
            threads = [threading.Thread(target=client, args=(name, url)) for _ in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=60)
            assert not any(thread.is_alive() for thread in threads), f"{name}: a request hung with Redis frozen"
        finally:
            os.kill(pid, signal.SIGCONT)
    assert not failures, failures
    slowest = {name: (max(t[0] for t in times), max(t[1] for t in times)) for name, times in seen.items()}
    print(f"Redis frozen, timeout {TIMEOUT * 1000:.0f} ms: slowest (middleware ms, client ms) {slowest}")
    assert all(len(times) == 12 for times in seen.values()), seen
    for name, (decided, _) in slowest.items():
        assert decided <= BOUND_MS, f"{name}: an answer took {decided:.0f} ms with Redis frozen (bound {BOUND_MS:.0f})"
