"""In-flight throttles at the doors, as deployed: one policy file's throttle
"partner" ("3 concurrent; 6000/minute" per account) applied by Django under
gunicorn, the WSGI middleware under gunicorn (2 workers x 4 threads each),
FastAPI behind the ASGI middleware under uvicorn (2 workers), a Rack app and
a Rails 6.1 app under puma (2 workers x 4 threads), on one Redis, over real
HTTP, with a Celery prefork worker and a Ruby process holding slots of the
same key. A slow upstream behind them never sees more than 3 calls at once
and sees nearly 3 while clients queue; a streamed body, a client that hangs
up in the middle of one, and an app that raises each give their slot back."""

import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import ThreadingHTTPServer
from types import SimpleNamespace

import pytest

import ratekeeper
from conftest import ROOT, free_port, http_servers, unique_prefix
from test_in_flight import RUBY_CALLER, SlowUpstream

SERVERS = os.path.join(ROOT, "tests", "python", "servers")
RUBY_SERVERS = os.path.join(ROOT, "tests", "ruby", "servers")
RULES = "3 concurrent; 6000/minute"
POLICY = """
exempt_paths = ["/health"]

[store]
url = "{url}"
prefix = "{prefix}"

[[throttle]]
scope = "partner"
rules = "{rules}"
key = "query:account"
paths = ["/call", "/stream", "/boom"]
"""
# door: (its server, the streamed path, the raising path, the scope its slots are held under)
STREAMING_DOORS = {
    "django": ("django", "/stream", "/boom", "partner"),
    "django @ratelimit": ("django", "/dstream", "/dboom", "view:dstream"),
    "wsgi": ("wsgi", "/stream", "/boom", "partner"),
    "asgi": ("asgi", "/stream", "/boom", "partner"),
    "rack": ("rack", "/stream", "/boom", "partner"),
}


class Upstream(SlowUpstream):
    """The slow upstream, noting who called by the path's first part
    (/upstream: a door; /celery, /ruby: a job)."""

    DELAY = 0.1
    callers: list = []

    def do_GET(self):
        super().do_GET()
        with self.lock:
            Upstream.callers.append(self.path.lstrip("/").split("?")[0])

    @classmethod
    def by(cls, who: str) -> int:
        with cls.lock:
            return cls.callers.count(who)


@pytest.fixture(scope="module")
def doors(tmp_path_factory):
    """The five doors' base URLs, the limiters of their throttles' scopes (to
    read their leases), the store and prefix, the upstream's base URL and the
    servers' environment, on the test Redis under a prefix of their own."""
    redis_url = os.environ.get("RATEKEEPER_TEST_REDIS", "redis://127.0.0.1:6379/0")
    tmp = tmp_path_factory.mktemp("in_flight_doors")
    prefix = unique_prefix()
    policy = tmp / "policy.toml"
    policy.write_text(POLICY.format(url=redis_url, prefix=prefix, rules=RULES))
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    env = {**os.environ, "IN_FLIGHT_POLICY": str(policy), "EDGE_POLICY": str(policy),
           "UPSTREAM": f"http://127.0.0.1:{upstream.server_address[1]}/upstream",
           "RUBYLIB": os.path.join(ROOT, "ruby", "lib") + os.pathsep + os.environ.get("RUBYLIB", "")}
    ports = {name: free_port() for name in ("django", "wsgi", "asgi", "rack", "rails")}
    gunicorn = [sys.executable, "-m", "gunicorn", "-w", "2", "-k", "gthread", "--threads", "4", "--chdir", SERVERS,
                "--log-level", "warning"]
    puma = ["puma", "-q", "-w", "2", "-t", "4:4"]
    commands = {
        "django": ["env", "IN_FLIGHT_DOOR=django", *gunicorn, "-b", f"127.0.0.1:{ports['django']}",
                   "in_flight_doors:django"],
        "wsgi": ["env", "IN_FLIGHT_DOOR=wsgi", *gunicorn, "-b", f"127.0.0.1:{ports['wsgi']}", "in_flight_doors:wsgi"],
        "asgi": ["env", "IN_FLIGHT_DOOR=asgi", sys.executable, "-m", "uvicorn", "--workers", "2", "--app-dir", SERVERS,
                 "--log-level", "warning", "--port", str(ports["asgi"]), "in_flight_doors:asgi"],
        "rack": [*puma, "-b", f"tcp://127.0.0.1:{ports['rack']}", os.path.join(RUBY_SERVERS, "in_flight.ru")],
        "rails": [*puma, "-b", f"tcp://127.0.0.1:{ports['rails']}",
                  os.path.join(RUBY_SERVERS, "rails_policy", "config.ru")],
    }
    limiters = {scope: ratekeeper.Limiter("3 concurrent", redis_url, scope=scope, prefix=prefix, on_error="raise")
                for scope in ("partner", "view:dstream")}
    base = f"http://127.0.0.1:{upstream.server_address[1]}"
    try:
        with http_servers(commands, ports, env, tmp, probe="/health") as urls:
            yield SimpleNamespace(urls=urls, limiters=limiters, store=redis_url, prefix=prefix, upstream=base,
                                  env=env)
    finally:
        upstream.shutdown()


def status_of(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            response.read()
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def within(seconds: float, done) -> float:
    """How long `done()` took to come true (polled every 20 ms); fails past `seconds`."""
    start = time.monotonic()
    while not done():
        if time.monotonic() - start > seconds:
            pytest.fail(f"not within {seconds} s")
        time.sleep(0.02)
    return time.monotonic() - start


def celery_worker(tmp_path, own_redis, env):
    """A Celery worker (the default prefork pool, 4 children) whose task
    holds a slot of the doors' throttle (its scope and key) while it calls
    the upstream, its broker a Redis of its own (`own_redis`)."""
    broker, _ = own_redis
    env = {**env, "RK_BROKER": f"redis://127.0.0.1:{broker}/0", "RK_RULES": RULES, "RK_SCOPE": "partner",
           "RK_KEY": "partner", "PYTHONPATH": os.pathsep.join(filter(None, [SERVERS, os.environ.get("PYTHONPATH")]))}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    log = open(tmp_path / "celery.log", "w")
    worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "in_flight_celery", "worker", "-P", "prefork",
                               "-c", "4", "--loglevel", "INFO", "--without-gossip", "--without-mingle"],
                              env=env, stdout=log, stderr=subprocess.STDOUT, cwd=SERVERS)
    return worker, log, env


# (alone: fifteen clients, seven servers and a Celery worker on two cores)
@pytest.mark.alone
def test_the_upstream_never_sees_more_than_three_calls_at_once(doors, tmp_path, own_redis):
    """On one key of "3 concurrent": fifteen HTTP clients, three per door,
    each on a connection it keeps open, in a process of their own, call
    /call until 300 calls went through (trying again 5 ms after a 429),
    while a Celery worker runs 40 tasks and a Ruby process's four threads
    make 40 holds, each calling the upstream (100 ms a call) while it holds
    its slot. The upstream never sees more than 3 at once, every door and
    job has its calls, and while the clients queue every slot is reused
    (3 at once in every sixth of that time)."""
    Celery = pytest.importorskip("celery").Celery
    urls = doors.urls
    SlowUpstream.now = SlowUpstream.most = 0
    SlowUpstream.calls, Upstream.callers = [], []
    # (RATEKEEPER_IN_FLIGHT_CALLS=1920: with the jobs' 80, the 2,000 calls
    # the issue asks for, in about 80 s)
    wanted = int(os.environ.get("RATEKEEPER_IN_FLIGHT_CALLS", "300"))
    deadline = time.monotonic() + 60 + wanted * 0.1
    jobs_env = {**os.environ, "RK_STORE": doors.store, "RK_PREFIX": doors.prefix,
                "RK_UPSTREAM": doors.upstream + "/celery"}
    worker, log, env = celery_worker(tmp_path, own_redis, jobs_env)
    ruby = subprocess.Popen(["ruby", "-e", RUBY_CALLER, doors.upstream + "/ruby", doors.store, "partner", "40",
                             doors.prefix], stdout=subprocess.PIPE, text=True, env=doors.env)
    # the tasks sent by name from an app of the test's own (the worker's
    # module may be imported in this process already, bound to another broker)
    sender = Celery("in_flight_sender", broker=env["RK_BROKER"])

    try:
        for n in range(40):
            sender.send_task("upstream", args=[n])
        # (in a process of their own: fifteen threads beside the upstream
        # would keep it waiting for this process's interpreter)
        clients = subprocess.run([sys.executable, "-c", CLIENTS, json.dumps(urls), str(wanted), str(deadline)],
                                 capture_output=True, text=True, timeout=deadline - time.monotonic() + 60)
        assert clients.returncode == 0, clients.stderr[-3000:]
        outcome = json.loads(clients.stdout)
        served, errors, clients_done = outcome["served"], outcome["errors"], outcome["done"]
        ruby_out = ruby.communicate(timeout=120)[0]
        while Upstream.by("celery") < 40 and time.monotonic() < deadline + 30:
            time.sleep(0.2)
    finally:
        ruby.kill()
        worker.terminate()
        worker.wait(timeout=30)
        log.close()
        sender.close()
    assert not errors, errors
    assert ruby_out.strip() == "done", ruby_out
    calls = sorted(SlowUpstream.calls)
    by = {who: Upstream.by(who) for who in ("celery", "ruby")}
    print(f"served by door: {served}; by jobs: {by}; upstream calls {len(calls)}; most at once {SlowUpstream.most}")
    assert sum(served.values()) >= wanted, served
    assert by == {"celery": 40, "ruby": 40}, (by, (tmp_path / "celery.log").read_text()[-3000:])
    assert len(calls) == sum(served.values()) + 80
    assert SlowUpstream.most == 3
    assert all(count > 0 for count in served.values()), served
    # (over the time the HTTP clients queue, retrying every 5 ms: after
    # them only the jobs' waiting holds are left, which look every 100 ms)
    since, until = calls[30][0], clients_done
    busy = sum(max(0.0, min(end, until) - max(start, since)) for start, end in calls)
    print(f"in flight on average: {busy / (until - since):.2f}")
    # every slot is reused while they queue: in each sixth of that time the
    # upstream had 3 calls at once (a slot a door or job kept past its call
    # would hold it to 2 for the lease's lifetime; the average itself is the
    # machine's speed, not the doors')
    slices = [since + (until - since) * n / 6 for n in range(7)]
    most = [most_at_once(calls, start, end) for start, end in zip(slices, slices[1:])]
    assert most == [3] * 6, most


# The HTTP clients of the test above: three threads per door (argv: the
# doors' URLs as JSON, the calls wanted, the deadline on the monotonic
# clock), each calling /call on a connection it keeps open until the calls
# wanted went through, trying again 5 ms after a 429; prints the calls each
# door served, the errors and when they were done.
CLIENTS = """
import http.client, json, sys, threading, time, urllib.parse
urls, wanted, deadline = json.loads(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
served, errors, lock = {name: 0 for name in urls}, [], threading.Lock()

def client(door):
    base = urllib.parse.urlsplit(urls[door])
    connection = None
    while time.monotonic() < deadline:
        with lock:
            if sum(served.values()) >= wanted:
                return
        # (one connection kept open, as a client of an API keeps one; made
        # again when a server closes it)
        try:
            connection = connection or http.client.HTTPConnection(base.hostname, base.port, timeout=30)
            connection.request("GET", base.path + "/call?account=partner")
            response = connection.getresponse()
            response.read()
            status = response.status
        except (OSError, http.client.HTTPException):
            connection = None
            continue
        if response.will_close:
            connection.close()
            connection = None
        if status == 200:
            with lock:
                served[door] += 1
        elif status == 429:
            time.sleep(0.005)
        else:
            errors.append((door, status))
            return

threads = [threading.Thread(target=client, args=(door,)) for door in urls for _ in range(3)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join(timeout=max(deadline - time.monotonic(), 0) + 60)
print(json.dumps({"served": served, "errors": errors, "done": time.monotonic()}))
"""


def most_at_once(calls: list, since: float, until: float) -> int:
    """The most of `calls` ((start, end) pairs) in flight at once between `since` and `until`."""
    # (sorted by time, an end before a start at the same time)
    edges = sorted(edge for start, end in calls if start < until and end > since
                   for edge in ((max(start, since), 1), (min(end, until), -1)))
    now = most = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def hang_up_in_the_middle(base: str, path: str) -> None:
    """Asks for a streamed body, reads its first chunk, and resets the connection."""
    port = int(base.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        got = b""
        while b"chunk 0" not in got:
            part = sock.recv(4096)
            assert part, f"the stream ended before its first chunk: {got!r}"
            got += part
        assert got.startswith(b"HTTP/1.1 200"), got[:40]
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


@pytest.mark.parametrize("door", STREAMING_DOORS)
def test_a_streamed_body_a_client_that_hangs_up_and_a_raising_app_give_the_slot_back(doors, door):
    server, stream, boom, scope = STREAMING_DOORS[door]
    base, held = doors.urls[server], doors.limiters[scope]
    account = door.replace(" @", "-")
    leases = lambda: held.leases(account.encode())  # noqa: E731
    # a body read to its end: held while it streams, given back at its end
    with urllib.request.urlopen(f"{base}{stream}?account={account}", timeout=30) as response:
        assert response.readline() == b"chunk 0\n"
        assert len(leases()) == 1, "held while the body streams"
        response.read()
    within(3, lambda: not leases())
    # a client that hangs up after the first of 20 chunks (2 s in all)
    hang_up_in_the_middle(base, f"{stream}?account={account}")
    took = within(1.5, lambda: not leases())
    print(f"{door}: the slot came back {took:.2f} s after the client hung up")
    # an app that raises: a 500, and the slot back
    assert status_of(f"{base}{boom}?account={account}") == 500
    within(3, lambda: not leases())
    # three slots at once, the fourth refused with the throttle's 429
    streams = [urllib.request.urlopen(f"{base}{stream}?account={account}", timeout=30) for _ in range(3)]
    try:
        assert len(leases()) == 3
        assert status_of(f"{base}{stream}?account={account}") == 429
    finally:
        for response in streams:
            response.close()
    within(3, lambda: not leases())


def test_a_door_that_never_sees_the_response_end_refuses_a_held_slot():
    """A FastAPI dependency returns before the response is sent: it refuses
    an in-flight throttle at once, naming it and the doors that can hold it."""
    import ratekeeper.fastapi

    policy = {"throttle": [{"scope": "exports", "rules": "2 concurrent", "key": "ip"}]}
    with pytest.raises(ratekeeper.ConfigurationError) as refused:
        ratekeeper.fastapi.policy(policy)
    assert "throttle 'exports' holds a slot while a request is under way" in str(refused.value)
    assert "the WSGI or ASGI middleware" in str(refused.value)
