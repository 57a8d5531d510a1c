"""A metered API behind each Python door, for the metered-throttle tests:
POST /v1/chat answers 200 with the tokens the call "used" (its query's
`used`) in the `X-Tokens-Used` header, behind the WSGI middleware (`wsgi`,
for gunicorn) and the ASGI middleware in a FastAPI app (`asgi`, for
uvicorn), both from the policy file METERED_POLICY names (a throttle with
meters, settled by that header). The dependency door refuses the policy (it
never sees the response)."""

import os
from urllib.parse import parse_qs

from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse

from door_routes import add_probes
from ratekeeper.asgi import RateLimitMiddleware as AsgiMiddleware
from ratekeeper.wsgi import RateLimitMiddleware as WsgiMiddleware

POLICY = os.environ["METERED_POLICY"]


def used(query: str) -> str:
    return parse_qs(query).get("used", ["0"])[0]


def chat_wsgi(environ, start_response):
    if environ.get("PATH_INFO") == "/health":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]
    start_response("200 OK", [("Content-Type", "text/plain"), ("X-Tokens-Used", used(environ.get("QUERY_STRING", "")))])
    return [b"answer"]


wsgi = WsgiMiddleware(chat_wsgi, policy=POLICY)

asgi = FastAPI()
asgi.add_middleware(AsgiMiddleware, policy=POLICY)


@asgi.post("/v1/chat")
async def chat(request: Request) -> PlainTextResponse:
    return PlainTextResponse("answer", headers={"X-Tokens-Used": used(request.url.query)})


add_probes(asgi, POLICY)
