"""ratekeeper-server as users deploy it: behind real nginx (auth_request) and
Caddy (forward_auth) with README's configurations, in front of a Django app
under gunicorn; one quota shared by the proxy's door and the app's own
(Django and Rack), on Redis and on Cluster; Redis failing; reloads under
load; hostile forwarded requests; --check-config."""

import json
import os
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import configured, unique_prefix
from edge import SERVER_BIN, EdgeServer, caddy, gunicorn_django, need, nginx, puma_rack, request, stop_all
from ratekeeper import Admin

API_POLICY = """
trusted_proxies = ["127.0.0.1"]
exempt_paths = ["/health"]
[store]
prefix = "{prefix}"
[[throttle]]
scope = "api"
rules = "{rules}"
key = "header:X-Api-Key"
paths = ["/api/"]
[[fail2ban]]
name = "probes"
paths = ['\\.php$']
maxretry = 2
bantime = 60
"""


def stores(redis_url):
    return {"redis": redis_url, "cluster": configured("RATEKEEPER_TEST_CLUSTER")}


@pytest.mark.parametrize("proxy", ["nginx", "caddy"])
def test_through_the_proxy_limits_exactly_blocks_and_skips_exempt_paths(redis_url, tmp_path, proxy):
    prefix = unique_prefix()
    server = EdgeServer(tmp_path, API_POLICY.format(prefix=prefix, rules="5/minute"), store=redis_url)
    started = []
    try:
        app, app_port = gunicorn_django(tmp_path, "proxied", redis_url, prefix)
        started.append(app)
        front, port = (nginx if proxy == "nginx" else caddy)(tmp_path, server.port, app_port)
        started.append(front)
        answers = [request(port, "/api/items", {"X-Api-Key": "k-1"}) for _ in range(8)]
        statuses = [a[0] for a in answers]
        assert statuses == [200] * 5 + [429] * 3, statuses
        assert answers[0][2] == b"django proxied /api/items", "an admitted request reaches the app"
        status, headers, body = answers[5]
        assert json.loads(body) == {"error": "rate_limited", "retry_after": int(headers["retry-after"])}
        assert 55 <= int(headers["retry-after"]) <= 60
        assert headers["content-type"].startswith("application/json")
        assert headers["ratelimit-policy"] == '"1m";q=5;w=60'
        if proxy == "nginx":
            assert answers[0][1]["x-ratelimit-remaining"] == "4", "nginx passes the headers on"
        # another key has its own quota; a path no throttle covers is not limited
        assert request(port, "/api/items", {"X-Api-Key": "k-2"})[0] == 200
        assert all(request(port, "/other")[0] == 200 for _ in range(8))
        # exempt paths never reach the server
        asked = server.asked()
        assert all(request(port, "/health")[0] == 200 for _ in range(5))
        assert server.asked() == asked
        # a client address blocked in the store: 403 and the JSON body, from any path
        Admin(redis_url, prefix=prefix).block("127.0.0.1", ttl=60, reason="test")
        blocked = None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            blocked = request(port, "/other")
            if blocked[0] == 403:
                break
            time.sleep(0.2)
        assert blocked[0] == 403 and json.loads(blocked[2]) == {"error": "blocked"}, blocked
    finally:
        stop_all(*started)
        assert server.stop() == 0, server.log()


FORGED_POLICY = """
trusted_proxies = ["127.0.0.1"]
exempt_paths = ["/health"]
[store]
prefix = "{prefix}"
[[throttle]]
scope = "login"
rules = "3/minute"
key = "ip"
paths = ["/login"]
methods = ["POST"]
[[throttle]]
scope = "api"
rules = "2/minute"
key = "header:X-Api-Key"
paths = ["/api/"]
tiers = {{ pro = "100/minute" }}
tier = "header:X-Plan"
[[fail2ban]]
name = "probes"
paths = ['\\.php$']
maxretry = 3
bantime = 60
"""

# every header a client could send to name another request, client or tier
FORGED = {"X-Forwarded-Uri": "/health", "X-Forwarded-Method": "GET", "X-Original-URI": "/health",
          "X-Original-Method": "GET", "X-Forwarded-Host": "elsewhere.example", "X-Forwarded-For": "203.0.113.77",
          "X-Real-IP": "203.0.113.78", "Forwarded": "for=203.0.113.79", "X-Plan": "pro"}


@pytest.mark.parametrize("proxy", ["nginx", "caddy"])
def test_forged_forwarded_headers_change_nothing(redis_url, tmp_path, proxy):
    """The docs' nginx and Caddy recipes as they are, with every forwarded
    header a client could forge sent beside real requests: the edge checks
    the path, method, client and tier the proxy saw, never the claimed ones."""
    prefix = unique_prefix()
    server = EdgeServer(tmp_path, FORGED_POLICY.format(prefix=prefix), store=redis_url)
    started = []
    try:
        app, app_port = gunicorn_django(tmp_path, "proxied", redis_url, prefix)
        started.append(app)
        front, port = (nginx if proxy == "nginx" else caddy)(tmp_path, server.port, app_port)
        started.append(front)
        # POST /login, forged and plain in turn: one client, one quota of 3
        logins = [request(port, "/login", FORGED if i % 2 else None, "POST") for i in range(5)]
        assert [a[0] for a in logins] == [200, 200, 200, 429, 429], [a[0] for a in logins]
        assert logins[1][2] == b"django proxied /login", "the app served the real request"
        # a claimed tier is the main rules (2/minute, not pro's 100)
        api = [request(port, "/api/items", {**FORGED, "X-Api-Key": "k-1"}) for _ in range(3)]
        assert [a[0] for a in api] == [200, 200, 429], [a[0] for a in api]
        assert api[2][1]["x-ratelimit-limit"] == "2", api[2][1]
        # probes behind a forged URI still strike: the third bans the client
        assert [request(port, "/wp/x.php", FORGED)[0] for _ in range(3)] == [403, 403, 403]
        assert request(port, "/page", FORGED)[0] == 403, "banned, whatever path it names"
        assert request(port, "/health")[0] == 200, "the real exempt path is exempt"
    finally:
        stop_all(*started)
        assert server.stop() == 0, server.log()


def test_fail2ban_bans_the_client_at_the_edge(redis_url, tmp_path):
    prefix = unique_prefix()
    server = EdgeServer(tmp_path, API_POLICY.format(prefix=prefix, rules="5/minute"), store=redis_url)
    try:
        probe = {"X-Forwarded-Uri": "/wp/x.php", "X-Forwarded-For": "203.0.113.50"}
        assert request(server.port, "/auth", probe)[0] == 403, "a probe itself is refused"
        ok = {"X-Forwarded-Uri": "/page", "X-Forwarded-For": "203.0.113.50"}
        assert request(server.port, "/auth", ok)[0] == 200, "one strike does not ban"
        assert request(server.port, "/auth", probe)[0] == 403
        assert request(server.port, "/auth", ok)[0] == 403, "the second strike banned the address"
        other = {"X-Forwarded-Uri": "/page", "X-Forwarded-For": "203.0.113.51"}
        assert request(server.port, "/auth", other)[0] == 200
        entries = Admin(redis_url, prefix=prefix).entries()
        assert [e["target"] for e in entries] == ["203.0.113.50/32"], entries
    finally:
        assert server.stop() == 0


def test_the_edge_servers_denials_are_in_the_record(redis_url, tmp_path):
    """Denials at the edge reach the store's record of who is limited (as
    the apps' do): Admin.top_denied names the key, the client address and
    its /24, with the exact count, within the server's policy refresh."""
    prefix = unique_prefix()
    server = EdgeServer(tmp_path, API_POLICY.format(prefix=prefix, rules="2/minute"), store=redis_url)
    try:
        statuses = [request(server.port, "/auth", {"X-Forwarded-Uri": "/api/items", "X-Api-Key": "k-7",
                                                   "X-Forwarded-For": f"198.51.100.{20 + i % 3}"})[0]
                    for i in range(7)]
        assert statuses == [200, 200, 429, 429, 429, 429, 429], statuses
        admin = Admin(redis_url, prefix=prefix)
        deadline = time.monotonic() + 15
        while True:
            top = admin.top_denied(window=300)
            if top["keys"] or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        assert server.stop() == 0
    assert top["keys"] == [{"scope": "api", "key": "k-7", "tag": "k-7", "count": 5}], top
    assert top["networks"] == [{"scope": "api", "network": "198.51.100.0/24", "count": 5}], top
    assert sorted((a["address"], a["count"]) for a in top["addresses"]) == [
        ("198.51.100.20", 2), ("198.51.100.21", 1), ("198.51.100.22", 2)], top
    assert sum(m["count"] for m in top["per_minute"]) == 5


@pytest.mark.parametrize("where", ["redis", "cluster"])
@pytest.mark.parametrize("app_kind", ["django", "rack"])
def test_one_quota_two_doors(redis_url, tmp_path, where, app_kind):
    """Requests for one API key through nginx (the server decides) and straight
    to the app (its middleware decides) admit exactly the limit together."""
    store = stores(redis_url)[where]
    prefix = unique_prefix()
    start = gunicorn_django if app_kind == "django" else puma_rack
    server = EdgeServer(tmp_path, API_POLICY.format(prefix=prefix, rules="7/minute"), store=store)
    started = []
    try:
        behind, behind_port = start(tmp_path, "proxied", store, prefix, "7/minute")
        started.append(behind)
        direct, direct_port = start(tmp_path, "direct", store, prefix, "7/minute")
        started.append(direct)
        front, proxy_port = nginx(tmp_path, server.port, behind_port)
        started.append(front)
        doors = [proxy_port, direct_port] * 8
        answers = [(door, request(door, "/api/items", {"X-Api-Key": "shared-key"})) for door in doors]
        admitted = [door for door, (status, _, _) in answers if status == 200]
        refused = [status for _, (status, _, _) in answers if status != 200]
        assert len(admitted) == 7, [(d, a[0]) for d, a in answers]
        assert set(refused) == {429}
        assert proxy_port in admitted and direct_port in admitted, "both doors admitted some"
        assert request(direct_port, "/api/items", {"X-Api-Key": "other-key"})[0] == 200
    finally:
        stop_all(*started)
        assert server.stop() == 0, server.log()


@pytest.mark.parametrize("on_error,expected", [("allow", 200), ("deny", 429)])
def test_redis_failing_answers_by_on_error_within_the_timeout(tmp_path, own_redis, on_error, expected):
    port, pid = own_redis
    policy = API_POLICY.format(prefix=unique_prefix(), rules="5/minute").replace(
        "[store]\n", f'[store]\non_error = "{on_error}"\ntimeout = 0.25\nurl = "redis://127.0.0.1:{port}/0"\n')
    server = EdgeServer(tmp_path, policy)
    ask = {"X-Forwarded-Uri": "/api/x", "X-Api-Key": "k"}
    try:
        assert request(server.port, "/auth", ask)[0] == 200
        os.kill(pid, signal.SIGSTOP)  # Redis stalls: every call waits out the timeout
        try:
            started = time.monotonic()
            status, _, _ = request(server.port, "/auth", ask, timeout=10)
            stalled = time.monotonic() - started
        finally:
            os.kill(pid, signal.SIGCONT)
        assert status == expected
        assert stalled < 5, f"answered after {stalled:.2f} s: the 0.25 s timeout (and connect retry) bounds it"
        os.kill(pid, signal.SIGTERM)  # Redis gone
        time.sleep(0.3)
        assert request(server.port, "/auth", ask, timeout=10)[0] == expected
        metrics = server.metrics()
        assert metrics['ratekeeper_store_errors_total{limiter="api"}'] >= 2
        assert request(server.port, "/healthz")[0] == 200
    finally:
        assert server.stop() == 0, server.log()


def test_reload_under_load_fails_no_request(tmp_path):
    policy = API_POLICY.format(prefix=unique_prefix(), rules="100000/minute")
    server = EdgeServer(tmp_path, policy)
    failures, done, answered = [], threading.Event(), [0]

    def hammer(n):
        while not done.is_set():
            try:
                status, headers, _ = request(server.port, "/auth", {"X-Forwarded-Uri": "/api/x", "X-Api-Key": f"k{n}"})
                if status != 200:
                    failures.append(status)
                answered[0] += 1
            except OSError as exc:
                failures.append(repr(exc))

    threads = [threading.Thread(target=hammer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    try:
        for i in range(6):
            time.sleep(0.3)
            server.write(policy.replace("100000/minute", f"{100000 + i}/minute"))
            server.hangup()
        time.sleep(0.3)
        server.write("this is [ not toml")
        server.hangup()
        time.sleep(0.5)
    finally:
        done.set()
        for t in threads:
            t.join()
    try:
        assert not failures, failures[:5]
        assert answered[0] > 100
        metrics = server.metrics()
        assert metrics['ratekeeper_server_reloads_total{result="ok"}'] == 6
        assert metrics['ratekeeper_server_reloads_total{result="failed"}'] == 1
        _, headers, _ = request(server.port, "/auth", {"X-Forwarded-Uri": "/api/x", "X-Api-Key": "new"})
        assert headers["x-ratelimit-limit"] == "100005", "the last good file is in force"
        log = server.log()
        assert "reload refused, the policy in force is kept" in log and "not valid" in log, log
    finally:
        assert server.stop() == 0


def raw(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        try:
            s.sendall(data)
        except OSError:  # the server may answer and close before it all went
            pass
        chunks = []
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def test_hostile_forwarded_requests_get_clear_errors_and_the_server_stays_up(tmp_path):
    server = EdgeServer(tmp_path, API_POLICY.format(prefix=unique_prefix(), rules="5/minute"))
    try:
        for headers, word in [
            ({"X-Forwarded-Method": "GE T"}, "X-Forwarded-Method"),
            ({"X-Forwarded-Uri": "no-slash"}, "not a path"),
            ({"X-Forwarded-Uri": "/" + "a" * 20000}, "longer"),
        ]:
            status, _, body = request(server.port, "/auth", headers)
            assert status == 400, (headers, status)
            answer = json.loads(body)
            assert answer["error"] == "bad_request" and word in answer["detail"], answer
        reply = raw(server.port, b"GET /auth HTTP/1.1\r\nHost: x\r\nX-Forwarded-Uri: /\xff\xfe\r\nConnection: close\r\n\r\n")
        assert reply.startswith(b"HTTP/1.1 400"), reply[:80]
        # a forged X-Forwarded-For from an untrusted peer is not believed; garbage hops stop the walk
        for xff in ["", "garbage", "1.2.3.4, , ::zz", "[::1]:80," * 200]:
            assert request(server.port, "/auth", {"X-Forwarded-For": xff, "X-Forwarded-Uri": "/"})[0] == 200
        # a huge header is answered (hyper's limits), not a hang or a crash
        for size in (200_000, 2_000_000):
            reply = raw(server.port, b"GET /auth HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Big: " + b"a" * size + b"\r\n\r\n")
            assert reply.split(b" ")[1] in (b"200", b"431"), reply[:80]
        assert raw(server.port, b"\x16\x03\x01garbage\r\n\r\n").startswith(b"HTTP/1.1 400")
        status, _, body = request(server.port, "/healthz")
        assert (status, body) == (200, b'{"status":"ok"}')
        assert server.metrics()['ratekeeper_server_requests_total{door="forward_auth",answer="bad_request"}'] >= 3
    finally:
        assert server.stop() == 0, server.log()


@pytest.mark.parametrize("store_name", ["redis", "cluster", "redis-module", "cluster-module"])
def test_hostile_key_bytes_are_limited_exactly(tmp_path, redis_url, store_name):
    """An X-Api-Key whose bytes are not UTF-8 (obs-text, as HTTP allows),
    4 KB of them included, is limited exactly on every Redis path, from the
    server's first check on."""
    from test_hostile import door_store

    policy = API_POLICY.format(prefix=unique_prefix(), rules="3/minute")
    server = EdgeServer(tmp_path, policy, store=door_store(store_name, redis_url))
    try:
        for key in (b"\xff", b"\xff\xfe\x80 caf\xe9", b"\xff" * 4096):
            head = b"GET /auth HTTP/1.1\r\nHost: x\r\nX-Forwarded-Uri: /api/items\r\nX-Api-Key: " + key
            got = [raw(server.port, head + b"\r\nConnection: close\r\n\r\n").split(b" ")[1] for _ in range(5)]
            assert got == [b"200", b"200", b"200", b"429", b"429"], f"{store_name}: {key[:8]!r}"
    finally:
        assert server.stop() == 0, server.log()


def test_check_config_names_the_problem(tmp_path):
    binary = need(SERVER_BIN)
    good = tmp_path / "good.toml"
    good.write_text(API_POLICY.format(prefix="p", rules="5/minute"))
    run = subprocess.run([binary, "--config", str(good), "--check-config"], capture_output=True, text=True)
    assert run.returncode == 0 and "ok: 1 throttle(s), 1 ban(s)" in run.stdout, run
    bad = tmp_path / "bad.toml"
    bad.write_text('[[throttle]]\nscope = "api"\nrules = "5/fortnight"\nkey = "ip"\n')
    run = subprocess.run([binary, "--config", str(bad), "--check-config"], capture_output=True, text=True)
    assert run.returncode == 2 and 'throttle[0] ("api")' in run.stderr and "fortnight" in run.stderr, run
    secret = subprocess.run([binary, "--config", str(good), "--check-config", "--store", "redix://:hunter2@host/0"],
                            capture_output=True, text=True)
    assert secret.returncode == 2 and "hunter2" not in secret.stderr + secret.stdout, secret
    missing = subprocess.run([binary, "--config", str(tmp_path / "none.toml"), "--check-config"],
                             capture_output=True, text=True)
    assert missing.returncode == 2 and "cannot read the policy file" in missing.stderr
    counted = tmp_path / "counted.toml"
    counted.write_text('[[throttle]]\nscope = "logins"\nrules = "5/5min"\nkey = "ip"\ncount = "failures"\n')
    run = subprocess.run([binary, "--config", str(counted), "--check-config"], capture_output=True, text=True)
    assert run.returncode == 2 and "throttle 'logins' counts only some responses" in run.stderr, run
    held = tmp_path / "held.toml"  # (forward auth and Envoy never learn when a request ends)
    held.write_text('[[throttle]]\nscope = "exports"\nrules = "2 concurrent; 100/minute"\nkey = "ip"\n')
    run = subprocess.run([binary, "--config", str(held), "--check-config"], capture_output=True, text=True)
    assert run.returncode == 2 and "throttle 'exports' holds a slot while a request is under way" in run.stderr, run
