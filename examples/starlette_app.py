"""Starlette with ratekeeper's ASGI middleware: 10/second; 100/minute per
client IP, HTTP requests and websocket handshakes alike. Run it with `uvicorn --app-dir examples starlette_app:app`;
RATEKEEPER_STORE picks the store (default: memory)."""

import os

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import PlainTextResponse
from starlette.routing import Route, WebSocketRoute

import ratekeeper
from ratekeeper.asgi import RateLimitMiddleware

limiter = ratekeeper.Limiter("10/second; 100/minute", os.environ.get("RATEKEEPER_STORE", "memory://"),
                             prefix=os.environ.get("RATEKEEPER_PREFIX", "demo"))


async def home(request):
    return PlainTextResponse("hello")


async def echo(websocket):
    await websocket.accept()
    await websocket.send_text(await websocket.receive_text())
    await websocket.close()


app = Starlette(routes=[Route("/", home), Route("/health", home), WebSocketRoute("/echo", echo)],
                middleware=[Middleware(RateLimitMiddleware, limiter=limiter, exempt=["/health"])])
