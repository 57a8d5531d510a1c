"""A login form behind the WSGI middleware (`wsgi`, for gunicorn) and behind
the ASGI middleware in a FastAPI app (`asgi`, for uvicorn): "5 failed logins
per 5 minutes per e-mail address" (count = "failures", keyed by the form's
email), a login with the password "right" 200, any other 401. The dependency
door refuses such a policy at once (a dependency never sees the response).
RATEKEEPER_STORE and _PREFIX from the environment."""

import os
from urllib.parse import parse_qs

from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse

from door_routes import add_probes
from ratekeeper.asgi import RateLimitMiddleware as AsgiMiddleware
from ratekeeper.wsgi import RateLimitMiddleware as WsgiMiddleware

POLICY = {
    "store": {"url": os.environ["RATEKEEPER_STORE"], "prefix": os.environ["RATEKEEPER_PREFIX"]},
    "exempt_paths": ["/health"],
    "throttle": [{"scope": "logins-email", "rules": "5/5min", "key": "identity:email", "paths": ["/login"],
                  "methods": ["POST"], "count": "failures"}],
}


def right(body: bytes) -> bool:
    return parse_qs(body.decode()).get("password") == ["right"]


def login_wsgi(environ, start_response):
    length = int(environ.get("CONTENT_LENGTH") or 0)
    ok = right(environ["wsgi.input"].read(length))
    start_response("200 OK" if ok else "401 Unauthorized", [("Content-Type", "text/plain")])
    return [b"welcome" if ok else b"no"]


wsgi = WsgiMiddleware(login_wsgi, policy=POLICY)

asgi = FastAPI()
asgi.add_middleware(AsgiMiddleware, policy=POLICY)


@asgi.post("/login")
async def login(request: Request) -> PlainTextResponse:
    ok = right(await request.body())
    return PlainTextResponse("welcome" if ok else "no", status_code=200 if ok else 401)


add_probes(asgi, POLICY)
