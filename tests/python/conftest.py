"""Shared fixtures: the test Redis (started by scripts/test), unique prefixes,
and the example Django project configured against that Redis."""

import contextlib
import itertools
import os
import sys
import time
from typing import Dict, Iterator, List

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REDIS_URL = os.environ.get("RATEKEEPER_TEST_REDIS", "redis://127.0.0.1:6379/0")
_counter = itertools.count()


def redis_targets():
    """(name, URL) of the test Redis and, when scripts/test started one, the Cluster."""
    found = [("redis", REDIS_URL)]
    if os.environ.get("RATEKEEPER_TEST_CLUSTER"):
        found.append(("cluster", os.environ["RATEKEEPER_TEST_CLUSTER"]))
    return found


def unique_prefix() -> str:
    """A Redis key prefix no other test uses."""
    return f"pytest-{os.getpid()}-{time.time_ns()}-{next(_counter)}"


def pytest_configure(config):
    sys.path.insert(0, os.path.join(ROOT, "examples", "django_project"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demo.settings")
    os.environ["RATEKEEPER_STORE"] = REDIS_URL
    os.environ["RATEKEEPER_PREFIX"] = unique_prefix()
    import django

    django.setup()


@pytest.fixture(scope="session")
def redis_url() -> str:
    import redis

    try:
        redis.Redis.from_url(REDIS_URL).ping()
    except Exception as exc:  # pragma: no cover - environment problem
        pytest.fail(f"no Redis at {REDIS_URL} ({exc}): run `bash scripts/test`, which starts one")
    return REDIS_URL


@pytest.fixture
def prefix() -> str:
    return unique_prefix()


def configured(var: str) -> str:
    """The URL scripts/test puts in `var`; skips the test when it is not set
    (and fails it under CI, where it always is)."""
    url = os.environ.get(var)
    if not url:
        if os.environ.get("CI"):
            pytest.fail(f"{var} is not set (scripts/test sets it)")
        pytest.skip(f"{var} is not set (scripts/test sets it)")
    return url


# the stores by name: the Redis servers scripts/test starts (the last two
# with the ratekeeper module loaded, so that checks go through it)
STORE_VARS = {
    "cluster": "RATEKEEPER_TEST_CLUSTER",
    "redis-module": "RATEKEEPER_TEST_REDIS_MODULE",
    "cluster-module": "RATEKEEPER_TEST_CLUSTER_MODULE",
}


@pytest.fixture(params=["memory", "redis", "cluster", "redis-module", "cluster-module"])
def store(request, redis_url) -> str:
    """Each test using it runs on every store: memory, Redis, the Redis
    Cluster, and a Redis and a Cluster with the module loaded (scripts/test
    starts them all)."""
    if request.param in STORE_VARS:
        return configured(STORE_VARS[request.param])
    return "memory://" if request.param == "memory" else redis_url


def port_is_free(port: int) -> bool:
    """Whether a TCP socket can bind `port` on loopback now."""
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


# Each pytest-xdist worker hands out ports from a range of its own (gw0:
# 12000-12999, gw1: 13000-13999, ...), below the kernel's ephemeral ports
# (32768-60999) and scripts/test's Cluster (20000-39999, bus ports included).
# A port the kernel chose (bind to port 0) is free only until the test's
# server binds it: another worker could be handed the same one meanwhile, or
# a client socket take it, and a test would then probe another test's server.
_PORTS_PER_WORKER = 1000
_worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").lstrip("gw") or 0) % 8
_ports = itertools.cycle(range(12000 + _PORTS_PER_WORKER * _worker, 12000 + _PORTS_PER_WORKER * (_worker + 1)))
for _ in range(os.getpid() % _PORTS_PER_WORKER):  # a rerun starts elsewhere in the range
    next(_ports)


def free_port() -> int:
    """A TCP port free on loopback now, from this worker's own range."""
    for _ in range(_PORTS_PER_WORKER):
        port = next(_ports)
        if port_is_free(port):
            return port
    raise RuntimeError(f"no free port in this worker's range ({_PORTS_PER_WORKER} tried)")


def start_redis(directory, *args: str) -> int:
    """Starts a Redis of a test's own in `directory` (loopback, no persistence)
    with extra `args`, waits for its pid file and returns its pid."""
    import shutil
    import subprocess

    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is not installed: run scripts/setup-debian")
    pidfile = os.path.join(str(directory), "redis.pid")
    subprocess.run(
        ["redis-server", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "yes",
         "--pidfile", pidfile, "--logfile", os.path.join(str(directory), "redis.log"), "--dir", str(directory),
         *args],
        check=True,
    )
    port = int(args[args.index("--port") + 1]) if "--port" in args else 0
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if os.path.exists(pidfile) and open(pidfile).read().strip() and (port == 0 or answers_ping(port)):
            return int(open(pidfile).read())
        time.sleep(0.05)
    pytest.fail(f"redis-server did not start: {open(os.path.join(str(directory), 'redis.log')).read()}")


def answers_ping(port: int) -> bool:
    """Whether the Redis on `port` answers PING with PONG: up, and done loading
    its data (while loading it answers LOADING); or asks for its password (a
    server with requirepass says that first)."""
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith((b"+PONG", b"-NOAUTH"))
    except OSError:
        return False


def stop_process(pid: int) -> None:
    """Stops a process this test started, by its pid (thawed first if frozen)."""
    import signal

    for sig in (signal.SIGCONT, signal.SIGTERM):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return


@pytest.fixture
def own_redis(tmp_path):
    """(port, pid) of a Redis of this test's own, so freezing or killing it
    disturbs no other test; stopped afterwards."""
    port = free_port()
    pid = start_redis(tmp_path, "--port", str(port))
    yield port, pid
    stop_process(pid)


def wait_for_http(url: str, seconds: float = 20.0, process=None) -> None:
    """Waits until `url` answers (any status), or fails naming the server's exit."""
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            pytest.fail(f"the server exited with {process.returncode}")
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"nothing answered at {url} within {seconds} s")


@contextlib.contextmanager
def http_servers(commands: Dict[str, List[str]], ports: Dict[str, int], env: Dict[str, str], logs_dir,
                 probe: str = "/") -> Iterator[Dict[str, str]]:
    """Starts each server command by name (its output in `logs_dir`/<name>.log), waits until each
    answers HTTP at `probe` on its port, and yields {name: base URL}; stops them all by pid afterwards."""
    import subprocess

    started, logs = {}, {}
    try:
        for name, command in commands.items():
            logs[name] = open(os.path.join(str(logs_dir), f"{name}.log"), "w")
            started[name] = subprocess.Popen(command, env=env, stdout=logs[name], stderr=subprocess.STDOUT)
        for name, port in ports.items():
            wait_for_http(f"http://127.0.0.1:{port}{probe}", process=started[name])
        yield {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
    finally:
        for process in started.values():
            process.terminate()
        for process in started.values():
            process.wait(timeout=20)
        for log in logs.values():
            log.close()


@pytest.fixture
def browser():
    """Headless Chromium (browsing.chromium): skipped when it is missing,
    failed under CI."""
    from browsing import chromium

    yield from chromium()
