"""With ``policy=`` the WSGI and ASGI middlewares' ``client_ip`` and
``client_key``, and the FastAPI helpers under a ``policy`` dependency,
believe the policy's trusted proxies and prefixes, as its gate does: a key
function calling them counts each client behind a trusted proxy, not the
proxy, and a forged X-Forwarded-For from an untrusted peer stays the
peer's. The policy is a dict (its key a callable calling the helper) or a
file (the route reads the helpers)."""

import asyncio
import sys

import pytest

import ratekeeper.fastapi
from ratekeeper.asgi import RateLimitMiddleware as AsgiMiddleware
from ratekeeper.wsgi import RateLimitMiddleware as WsgiMiddleware

PROXY, CLIENT, OTHER, STRANGER = "10.0.0.5", "198.51.100.7", "192.0.2.8", "203.0.113.9"


def policy_of(kind, redis_url, prefix, key, tmp_path):
    """The policy: trusted proxies 10.0.0.0/8, clients by their /24, one
    request a minute each; a dict keyed by `key`, or a file keyed by ip."""
    table = {"trusted_proxies": ["10.0.0.0/8"], "ipv4_prefix": 24,
             "store": {"url": redis_url, "prefix": prefix}}
    if kind == "dict":
        return {**table, "throttle": [{"scope": "api", "rules": "1/minute", "key": key}]}
    path = tmp_path / "policy.toml"
    path.write_text(f'trusted_proxies = ["10.0.0.0/8"]\nipv4_prefix = 24\n'
                    f'[store]\nurl = "{redis_url}"\nprefix = "{prefix}"\n'
                    '[[throttle]]\nscope = "api"\nrules = "1/minute"\nkey = "ip"\n')
    return str(path)


def wsgi_door(kind, redis_url, prefix, tmp_path):
    """request(peer, forwarded_for) -> (status, client_ip, client_key) at the WSGI door."""
    def app(environ, start_response):
        start_response("200 OK", [])
        return [f"{door.client_ip(environ)} {door.client_key(environ)}".encode()]

    door = WsgiMiddleware(app, policy=policy_of(kind, redis_url, prefix, lambda env: door.client_key(env),
                                                tmp_path))

    def request(peer, forwarded_for):
        status = []
        body = b"".join(door({"REQUEST_METHOD": "GET", "PATH_INFO": "/", "REMOTE_ADDR": peer,
                              "HTTP_X_FORWARDED_FOR": forwarded_for},
                             lambda line, headers: status.append(int(line.split()[0]))))
        return (status[0], *body.decode().split()) if status[0] == 200 else (status[0],)

    return request


def asgi_call(app, peer, forwarded_for):
    """(status, body) of a GET sent to an ASGI app from `peer`."""
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": "/", "raw_path": b"/", "query_string": b"",
             "headers": [(b"host", b"example.com"), (b"x-forwarded-for", forwarded_for.encode())],
             "client": (peer, 5000), "server": ("example.com", 80), "scheme": "http", "root_path": "",
             "http_version": "1.1"}
    asyncio.run(app(scope, receive, send))
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


def asgi_door(kind, redis_url, prefix, tmp_path):
    """request(peer, forwarded_for) at the ASGI door."""
    async def app(scope, receive, send):
        body = f"{door.client_ip(scope)} {door.client_key(scope)}".encode()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})

    door = AsgiMiddleware(app, policy=policy_of(kind, redis_url, prefix, lambda scope: door.client_key(scope),
                                                tmp_path))

    def request(peer, forwarded_for):
        status, body = asgi_call(door, peer, forwarded_for)
        return (status, *body.decode().split()) if status == 200 else (status,)

    return request


def fastapi_door(kind, redis_url, prefix, tmp_path):
    """request(peer, forwarded_for) at a FastAPI app guarded by a policy dependency."""
    from fastapi import Depends, FastAPI
    from fastapi.responses import PlainTextResponse
    from starlette.requests import Request

    policy = policy_of(kind, redis_url, prefix,
                       lambda scope: ratekeeper.fastapi.client_key(Request(scope)), tmp_path)
    app = FastAPI(dependencies=[Depends(ratekeeper.fastapi.policy(policy))])
    ratekeeper.fastapi.setup(app)

    @app.get("/")
    def home(request: Request):
        return PlainTextResponse(f"{ratekeeper.fastapi.client_ip(request)} {ratekeeper.fastapi.client_key(request)}")

    def request(peer, forwarded_for):
        status, body = asgi_call(app, peer, forwarded_for)
        return (status, *body.decode().split()) if status == 200 else (status,)

    return request


@pytest.mark.parametrize("kind", ["dict", "file"])
@pytest.mark.parametrize("door", [wsgi_door, asgi_door, fastapi_door], ids=["wsgi", "asgi", "fastapi"])
def test_the_helpers_believe_the_policys_trusted_proxies(door, kind, redis_url, prefix, tmp_path):
    request = door(kind, redis_url, prefix, tmp_path)
    # behind the trusted proxy: each client is itself (its /24, as the policy says), with its own quota
    assert request(PROXY, CLIENT) == (200, CLIENT, "198.51.100.0/24")
    assert request(PROXY, OTHER) == (200, OTHER, "192.0.2.0/24")
    assert request(PROXY, CLIENT) == (429,)
    # an untrusted peer's X-Forwarded-For is not believed: it is the peer, whatever it claims
    assert request(STRANGER, CLIENT + ", 10.0.0.1") == (200, STRANGER, "203.0.113.0/24")
    assert request(STRANGER, "192.0.2.99") == (429,)
