"""Hostile input: keys of every awkward shape on Redis and the Cluster, and a
panic inside the core surfacing as an exception, not a crash."""

import pytest
import redis as redis_py

import ratekeeper
from conftest import redis_targets, unique_prefix

HOSTILE_KEYS = [
    "",
    "x" * 1_000_000,
    "nul\x00inside",
    "line\nbreak\r\n",
    "{brace}",
    "}{",
    "#looks-hashed",
    "caf\u00e9 \U0001f600",
    b"\xff\xfe\x00{not utf-8}",
    bytes(range(256)),
]


@pytest.mark.parametrize("name,url", redis_targets(), ids=[s[0] for s in redis_targets()])
def test_hostile_keys_are_limited_and_stay_small(name, url, redis_url):
    prefix = unique_prefix()
    limiter = ratekeeper.Limiter("1/hour", url, prefix=prefix, on_error="raise", timeout=5)
    for key in HOSTILE_KEYS:
        assert limiter.check(key).allowed, repr(key)[:40]
        assert not limiter.check(key).allowed, repr(key)[:40]
    if name == "redis":
        r = redis_py.Redis.from_url(url)
        keys = list(r.scan_iter(match=f"{prefix}:*", count=1000))
        assert len(keys) == len(HOSTILE_KEYS)
        assert max(len(k) for k in keys) <= len(prefix) + 4 + 128, "a long key reached Redis unhashed"


def test_a_panic_in_the_core_is_an_exception():
    with pytest.raises(ratekeeper.RateKeeperError, match="deliberate panic"):
        ratekeeper._ratekeeper._panic_for_tests()
    # and the module keeps working
    assert ratekeeper.Limiter("1/s").check("k").allowed


def test_malformed_rules_and_options_never_crash():
    for rules in ["", ";;;", "1/", "/1s", "1//s", "1/s/s", "1 per", "\x00", "9" * 400 + "/s", "1/1e3s", "NaN/s"]:
        with pytest.raises(ratekeeper.ConfigurationError):
            ratekeeper.Limiter(rules)
    for rules in [[], [()], [(1,)], [(1, 2, 3)], [("1", 2)], [(1, "2")], [None]]:
        with pytest.raises((TypeError, ratekeeper.ConfigurationError)):
            ratekeeper.Limiter(rules)


# Key bytes a client can send in a header (or a forged environ): not UTF-8,
# NUL, CR/LF, 4 KB; each must be limited exactly on every store and door.
DOOR_KEYS = [b"\xff", b"\xff\xfe\x80 caf\xe9", b"a\x00b", b"a\r\nb", b"\xff" * 4096]
# each Redis path; "redis" has no module (checks go through the script)
DOOR_STORES = ["redis", "cluster", "redis-module", "cluster-module"]


def door_store(name: str, redis_url: str) -> str:
    from conftest import STORE_VARS, configured

    return redis_url if name == "redis" else configured(STORE_VARS[name])


def statuses_wsgi(url: str, key: bytes) -> list:
    """Statuses of 5 requests carrying `key` in X-Api-Key through a fresh WSGI
    middleware (a fresh limiter: its first check is this key's)."""
    from ratekeeper.wsgi import RateLimitMiddleware

    def hello(environ, start_response):
        start_response("200 OK", [])
        return [b"hello"]

    limiter = ratekeeper.Limiter("3/minute", url, prefix=unique_prefix(), on_error="raise", timeout=5)
    # WSGI hands header bytes over decoded as Latin-1; the key is those bytes
    app = RateLimitMiddleware(hello, limiter, key=lambda env: env["HTTP_X_API_KEY"].encode("latin-1"))
    out = []
    for _ in range(5):
        got = []
        app({"REMOTE_ADDR": "203.0.113.1", "PATH_INFO": "/", "HTTP_X_API_KEY": key.decode("latin-1")},
            lambda status, headers, exc_info=None: got.append(int(status.split()[0])))
        out.append(got[0])
    return out


def statuses_asgi(url: str, key: bytes) -> list:
    """The same through a fresh ASGI middleware (awaited checks)."""
    import asyncio

    from ratekeeper.asgi import RateLimitMiddleware

    async def hello(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"hello"})

    limiter = ratekeeper.Limiter("3/minute", url, prefix=unique_prefix(), on_error="raise", timeout=5)
    app = RateLimitMiddleware(hello, limiter, key=lambda scope: dict(scope["headers"])[b"x-api-key"])

    async def one() -> int:
        sent = []

        async def receive():
            return {"type": "http.request", "body": b""}

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "method": "GET", "path": "/", "headers": [(b"x-api-key", key)],
                 "client": ("203.0.113.1", 5000)}
        await app(scope, receive, send)
        return sent[0]["status"]

    async def five() -> list:
        return [await one() for _ in range(5)]

    return asyncio.run(five())


@pytest.mark.parametrize("store_name", DOOR_STORES)
@pytest.mark.parametrize("door", ["wsgi", "asgi"])
def test_hostile_header_keys_are_limited_exactly_through_every_door(door, store_name, redis_url):
    url = door_store(store_name, redis_url)
    run = statuses_wsgi if door == "wsgi" else statuses_asgi
    for key in DOOR_KEYS:
        assert run(url, key) == [200, 200, 200, 429, 429], f"{door} on {store_name}: {key[:8]!r}"


HOSTILE_COSTS = [6, 2**40, 2**63 - 1, 2**63, 2**64, 2**64 + 1, 2**200]


def test_a_hostile_cost_is_a_denial_on_every_store(store, caplog):
    """A cost a request may choose (tokens asked for, a batch size) never
    switches limiting off: above the limit it is denied for good, on every
    store, with the default on_error="allow", and never warns of a failing
    store."""
    limiter = ratekeeper.Limiter("5/second; 10/minute", store, prefix=unique_prefix())
    with caplog.at_level("WARNING"):
        for cost in HOSTILE_COSTS:
            for call in (limiter.check, limiter.peek):
                decision = call("k", cost=cost)
                assert not decision.allowed, (call.__name__, cost)
                assert decision.retry_after is None, (call.__name__, cost)
        assert limiter.check("k", cost=5).allowed
        [decision] = limiter.check_many(["m"], cost=2**64)
        assert not decision.allowed and decision.retry_after is None
    assert "failing" not in caplog.text


@pytest.mark.parametrize("cost,error", [
    (0, ValueError), (-1, ValueError), (-(2**64), ValueError), (-(2**200), ValueError),
    (1.0, TypeError), (2.5, TypeError), (True, TypeError), ("3", TypeError), (float("inf"), TypeError),
])
def test_a_cost_that_is_not_a_whole_number_of_at_least_one_is_an_error_naming_it(cost, error):
    limiter = ratekeeper.Limiter("5/second", "memory://")
    with pytest.raises(error, match="cost"):
        limiter.check("k", cost=cost)
