"""The WSGI middleware under a real WSGI server (wsgiref), hit over HTTP."""

import json
import threading
import urllib.error
import urllib.request
from wsgiref.simple_server import WSGIRequestHandler, make_server

import pytest

import ratekeeper
from ratekeeper import Limiter
from ratekeeper.wsgi import RateLimitMiddleware


def hello(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"hello"]


class Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def serve():
    servers = []

    def start(app):
        server = make_server("127.0.0.1", 0, app, handler_class=Quiet)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def get(url, headers=None):
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


def test_headers_then_429_with_json_body(serve, redis_url, prefix):
    limiter = Limiter("2/minute; 10/hour", redis_url, prefix=prefix)
    base = serve(RateLimitMiddleware(hello, limiter, exempt=["/health"]))
    first = get(base + "/")
    assert first[0] == 200 and first[2] == b"hello"
    assert first[1]["X-RateLimit-Limit"] == "2"
    assert first[1]["X-RateLimit-Remaining"] == "1"
    assert first[1]["RateLimit-Policy"] == '"1m";q=2;w=60, "1h";q=10;w=3600'
    assert get(base + "/")[0] == 200
    status, headers, body = get(base + "/")
    assert status == 429
    assert headers["Content-Type"] == "application/json"
    assert 1 <= int(headers["Retry-After"]) <= 60
    assert json.loads(body) == {"error": "rate_limited", "retry_after": int(headers["Retry-After"])}
    assert headers["X-RateLimit-Remaining"] == "0"
    # exempt paths are never limited and carry no headers
    status, headers, _ = get(base + "/health")
    assert status == 200 and "X-RateLimit-Limit" not in headers


def test_spoofed_forwarded_for_is_ignored_from_untrusted_peers(serve, prefix):
    limiter = Limiter("1/minute", prefix=prefix)
    base = serve(RateLimitMiddleware(hello, limiter))
    assert get(base + "/", {"X-Forwarded-For": "1.1.1.1"})[0] == 200
    # a new fake address does not buy a new quota: the peer is 127.0.0.1
    assert get(base + "/", {"X-Forwarded-For": "2.2.2.2"})[0] == 429


def test_trusted_proxy_forwards_the_client(serve, prefix):
    limiter = Limiter("1/minute", prefix=prefix)
    base = serve(RateLimitMiddleware(hello, limiter, trusted_proxies=["127.0.0.1"]))
    assert get(base + "/", {"X-Forwarded-For": "198.51.100.1"})[0] == 200
    assert get(base + "/", {"X-Forwarded-For": "198.51.100.2"})[0] == 200
    assert get(base + "/", {"X-Forwarded-For": "198.51.100.1"})[0] == 429
    assert get(base + "/", {"X-Forwarded-For": "not an ip, at all"})[0] == 200  # keyed to the proxy itself


def test_custom_key_responder_and_status(serve, prefix):
    def teapot(environ, start_response, decision):
        start_response("418 I'm a teapot", [("X-Wait", str(decision.retry_after))])
        return [b"slow down"]

    limiter = Limiter("1/minute", prefix=prefix)
    app = RateLimitMiddleware(
        hello, limiter, key=lambda environ: environ.get("HTTP_X_API_KEY"), responder=teapot
    )
    base = serve(app)
    assert get(base + "/", {"X-Api-Key": "a"})[0] == 200
    status, headers, body = get(base + "/", {"X-Api-Key": "a"})
    assert (status, body) == (418, b"slow down") and float(headers["X-Wait"]) > 0
    # no key: not limited
    assert all(get(base + "/")[0] == 200 for _ in range(3))
    plain = serve(RateLimitMiddleware(hello, Limiter("1/minute", prefix=prefix), status=503))
    get(plain + "/")
    assert get(plain + "/")[0] == 503


def test_middleware_rejects_a_non_limiter():
    with pytest.raises(TypeError, match="ratekeeper.Limiter"):
        RateLimitMiddleware(hello, "10/minute")


def test_a_blocked_client_gets_403_blocked_as_from_django_and_rack(serve, redis_url, prefix):
    import ratekeeper

    limiter = Limiter("100/minute", redis_url, prefix=prefix, controls_refresh=0.1)
    admin = ratekeeper.Admin(redis_url, prefix=prefix)
    url = serve(RateLimitMiddleware(hello, limiter, key=lambda env: env.get("HTTP_X_USER")))
    teapot = serve(RateLimitMiddleware(hello, limiter, key=lambda env: env.get("HTTP_X_USER"), blocked_status=418))

    def get(base, user="u1"):
        request = urllib.request.Request(base + "/", headers={"X-User": user})
        try:
            with urllib.request.urlopen(request) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    assert get(url)[0] == 200
    admin.block("user:bad")
    assert get(url, "user:bad") == (403, b'{"error":"blocked"}')
    assert get(teapot, "user:bad")[0] == 418
    admin.block("127.0.0.1", ttl=60)
    limiter.check("refresh")  # the process that blocked sees it at once; this one within controls_refresh
    import time

    time.sleep(0.25)
    assert get(url, "anyone") == (403, b'{"error":"blocked"}'), "the client address is screened"
    admin.unblock("127.0.0.1")


def test_an_ipv6_client_is_its_64(redis_url, prefix):
    """The default key is the client: 100 requests from 100 addresses of one
    /64 share one quota; another /64 has its own; an IPv4-mapped address is
    its IPv4 address."""

    def statuses(app, addresses):
        out = []
        for address in addresses:
            app({"REMOTE_ADDR": address, "PATH_INFO": "/"}, lambda s, h, e=None: out.append(int(s.split()[0])))
        return out

    app = RateLimitMiddleware(hello, Limiter("50/minute", redis_url, prefix=prefix))
    assert statuses(app, [f"2001:db8:1:2::{i:x}" for i in range(1, 101)]) == [200] * 50 + [429] * 50
    assert statuses(app, ["2001:db8:1:3::1"]) == [200]
    statuses(app, ["203.0.113.77"] * 50)
    assert statuses(app, ["::ffff:203.0.113.77"]) == [429]
    wide = RateLimitMiddleware(hello, Limiter("50/minute", redis_url, prefix=prefix + "w"), ipv6_prefix=128)
    assert set(statuses(wide, [f"2001:db8:9::{i:x}" for i in range(1, 101)])) == {200}
    with pytest.raises(ratekeeper.ConfigurationError, match="ipv6_prefix 40: give 48 to 128"):
        RateLimitMiddleware(hello, Limiter("1/s"), ipv6_prefix=40)


def test_a_path_scoped_policy_holds_however_the_path_is_spelled(serve):
    """Over HTTP through wsgiref, which hands the path's bytes over as
    Latin-1 text (PEP 3333): the policy sees the path as every door does,
    its escapes decoded, its bytes read as UTF-8 and its slashes single."""
    policy = {"throttle": [{"scope": "cafe", "rules": "3/minute", "key": "ip", "paths": ["/caf\u00e9"]}]}
    url = serve(RateLimitMiddleware(hello, policy=policy))
    got = [get(url + path)[0] for path in ("/caf%C3%A9", "//caf%C3%A9/x", "/caf%c3%a9", "/caf%C3%A9")]
    assert got == [200, 200, 200, 429]
    assert get(url + "/cafe")[0] == 200 and get(url + "/caf%E9")[0] == 200  # other paths
