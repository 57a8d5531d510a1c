"""The ASGI door's own conversions: `Gate.decide_scope` reads a scope as a
door handing `decide` its facts would, hostile bytes included, and
`Answer.asgi_send` adds a passed request's headers to the response the app
starts and nothing else."""

import asyncio

import pytest

import ratekeeper

POLICY = {
    "trusted_proxies": ["127.0.0.1"],
    "throttle": [
        {"scope": "api", "rules": "2/minute", "key": "header:X-Api-Key", "hosts": ["api.example.com"],
         "paths": ["/api/"], "methods": ["POST"]},
        {"scope": "search", "rules": "2/minute", "key": "query:q"},
        {"scope": "ip", "rules": "3/minute", "key": "ip"},
    ],
}

HOSTILE = [b"caf\xe9", b"\xff\xfe\x00", b"a\x00b", b"a\r\nSet-Cookie: x=1", b"", b" "]


def scopes():
    """Scopes as servers fill them, and as they leave fields out."""
    made = [
        {"type": "http", "method": "POST", "path": "/api/items", "query_string": b"q=cats",
         "headers": [(b"host", b"API.example.com:443"), (b"x-api-key", b"k1")], "client": ("203.0.113.1", 5000)},
        {"type": "http", "method": "post", "path": "/api/items", "query_string": b"",
         "headers": [[b"Host", b"api.example.com"], [b"X-Api-Key", b"k1"]], "client": ("203.0.113.1", 5000)},
        {"type": "http", "headers": [(b"x-forwarded-for", b"198.51.100.7")], "client": ("127.0.0.1", 1)},
        {"type": "http", "path": "", "query_string": None, "headers": None, "client": None},
        {"type": "websocket", "path": "/api/ws", "headers": [(b"host", b"api.example.com")],
         "client": ("2001:db8::1", 1)},
    ]
    for bad in HOSTILE:
        made.append({"type": "http", "method": "POST", "path": "/api/x", "query_string": b"q=" + bad,
                     "headers": [(b"host", b"api.example.com"), (b"x-api-key", bad), (b"x-forwarded-for", bad)],
                     "client": ("127.0.0.1", 1)})
    return made


def facts(scope):
    """The facts a door reading the scope in Python hands `decide`."""
    headers = scope.get("headers") or []
    host = next((v.decode("latin-1") for k, v in headers if k.lower() == b"host"), "")
    client = scope.get("client")
    return ((scope.get("method", "GET"), scope.get("path") or "/", host, client[0] if client else "", headers,
             (scope.get("query_string") or b"").decode("latin-1")), {"context": scope})


def shown(verdict):
    return (verdict.ending, verdict.answer.status, [(s, k, d.allowed, d.remaining) for s, k, d in verdict.checked])


def test_a_scope_is_decided_as_its_facts_are():
    by_scope = ratekeeper.Gate(POLICY, limiter=ratekeeper.Limiter("1/second"))
    by_facts = ratekeeper.Gate(POLICY, limiter=ratekeeper.Limiter("1/second"))
    seen = set()
    for _ in range(4):  # past every quota: the denials must agree too
        for scope in scopes():
            args, kwargs = facts(scope)
            got, want = shown(by_scope.decide_scope(scope)), shown(by_facts.decide(*args, **kwargs))
            assert got == want, scope
            seen.add(got[0])
    assert seen == {"pass", "deny"}
    # the scope is the context the policy's callables are called with
    called = []
    gate = ratekeeper.Gate({"throttle": [{"scope": "s", "rules": "1/minute", "key": lambda s: called.append(s) or "k"}]},
                           limiter=ratekeeper.Limiter("1/second"))
    scope = scopes()[0]
    assert gate.decide_scope(scope).ending == "pass" and called == [scope]


def test_the_awaited_twin_decides_alike():
    gate = ratekeeper.Gate(POLICY, limiter=ratekeeper.Limiter("1/second"))
    other = ratekeeper.Gate(POLICY, limiter=ratekeeper.Limiter("1/second"))

    async def run():
        return [shown(await gate.adecide_scope(s, cost=2)) for s in scopes()]

    assert asyncio.run(run()) == [shown(other.decide_scope(s, cost=2)) for s in scopes()]


@pytest.mark.parametrize("headers", [[(b"host", "text")], [("host", b"x")], [(b"host",)], [b"host: x"], 7])
def test_a_malformed_scope_is_a_type_error_naming_it(headers):
    gate = ratekeeper.Gate(POLICY, limiter=ratekeeper.Limiter("1/second"))
    with pytest.raises(TypeError, match="ASGI header must be a \\(name, value\\) pair of bytes|not iterable"):
        gate.decide_scope({"type": "http", "headers": headers})
    with pytest.raises(TypeError):
        gate.decide_scope({"type": "http", "query_string": "q=1"})


def start(headers):
    return {"type": "http.response.start", "status": 200, "headers": headers}


def test_asgi_send_adds_the_headers_the_app_does_not_set():
    limiter = ratekeeper.Limiter("5/minute")
    answer = ratekeeper.Responses().answer(limiter.check("k", now=1000.0))
    sent = []

    async def send(message):
        sent.append(message)

    wrapped = answer.asgi_send(send)

    async def run():
        own = start([(b"content-type", b"text/plain"), (b"X-RateLimit-Limit", b"app's own")])
        await wrapped(own)
        await wrapped({"type": "http.response.body", "body": b"ok"})
        return own

    own = asyncio.run(run())
    assert own["headers"] == [(b"content-type", b"text/plain"), (b"X-RateLimit-Limit", b"app's own")]  # untouched
    added = [h for h in answer.asgi_headers if h[0] != b"x-ratelimit-limit"]
    assert sent[0] == start([(b"content-type", b"text/plain"), (b"X-RateLimit-Limit", b"app's own"), *added])
    assert sent[1] == {"type": "http.response.body", "body": b"ok"}
    assert len(added) == len(answer.asgi_headers) - 1 == 5
    # a start without headers gets them all; no headers to add: send itself
    sent.clear()
    asyncio.run(wrapped({"type": "http.response.start", "status": 204}))
    assert sent[0]["headers"] == answer.asgi_headers
    assert ratekeeper.Responses(headers="none").answer(limiter.check("k")).asgi_send(send) is send


def test_the_fastapi_dependency_reads_a_request_as_the_middleware_does():
    """A path holding '?', '#' or a backslash (sent percent-encoded: the
    scope holds it decoded) is the same path at both ASGI doors, as at every
    other door; Starlette's `request.url.path` would escape them again."""
    from fastapi import Depends, FastAPI

    import ratekeeper.fastapi
    from ratekeeper.asgi import RateLimitMiddleware

    policy = {"throttle": [{"scope": "files", "rules": "1/minute", "key": "ip", "paths": ["/files/a?b#c\\d"]}]}

    def dependency_app():
        app = FastAPI(dependencies=[Depends(ratekeeper.fastapi.policy(policy))])
        ratekeeper.fastapi.setup(app)
        app.add_api_route("/{rest:path}", lambda: "ok", methods=["GET"])
        return app

    async def bare(scope, receive, send):
        await send(start([]))
        await send({"type": "http.response.body", "body": b"ok"})

    async def statuses(app):
        got = []
        for _ in range(2):
            sent = []

            async def receive():
                return {"type": "http.request", "body": b"", "more_body": False}

            async def send(message):
                sent.append(message)

            await app({"type": "http", "method": "GET", "path": "/files/a?b#c\\d/x", "raw_path": b"/files/a%3Fb%23c%5Cd/x",
                       "query_string": b"", "headers": [(b"host", b"example.com")], "client": ("203.0.113.9", 5000),
                       "server": ("example.com", 80), "scheme": "http", "root_path": "", "http_version": "1.1"},
                      receive, send)
            got.append(sent[0]["status"])
        return got

    for make in (dependency_app, lambda: RateLimitMiddleware(bare, policy=policy)):
        assert asyncio.run(statuses(make())) == [200, 429], make


def test_a_path_scoped_throttle_holds_whatever_the_slashes():
    """A run of slashes is one slash at every door (Rails routes //login to
    /login, Werkzeug merges them): a policy's /login holds for //login."""
    policy = {"throttle": [{"scope": "login", "rules": "2/minute", "key": "ip", "paths": ["/login"]}]}
    gate = ratekeeper.Gate(policy, limiter=ratekeeper.Limiter("1/second"))
    by_scope = [gate.decide_scope({"type": "http", "path": path, "client": ("203.0.113.40", 1)}).ending
                for path in ("/login", "//login", "///login/x")]
    by_facts = [gate.decide("GET", path, "", "203.0.113.41", {}).ending for path in ("//login", "/login", "//login")]
    assert by_scope == by_facts == ["pass", "pass", "deny"]
    assert gate.decide("GET", "//logout", "", "203.0.113.41", {}).checked == []


def test_a_websocket_gives_its_slot_back_when_it_closes():
    """A websocket holds a slot while it is open and never starts an HTTP
    response: the door tells the gate its end without a status."""
    from ratekeeper.asgi import RateLimitMiddleware

    async def app(scope, receive, send):
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.close"})

    door = RateLimitMiddleware(app, policy={"store": {"url": "memory://"}, "throttle": [
        {"scope": "ws", "rules": "1 concurrent; 100/minute", "key": "ip"}]})
    scope = {"type": "websocket", "path": "/ws", "headers": [], "client": ("203.0.113.5", 1)}

    async def connect():
        sent = []

        async def receive():
            return {"type": "websocket.connect"}

        async def send(message):
            sent.append(message["type"])

        await door(dict(scope), receive, send)
        return sent

    async def twice():
        return [await connect(), await connect()]

    first, second = asyncio.run(twice())
    assert first == ["websocket.accept", "websocket.close"], first
    assert second == ["websocket.accept", "websocket.close"], "the first connection's slot went back"
