"""An ASGI app behind ratekeeper's ASGI middleware (awaited checks) on
RK_STORE with a timeout of RK_TIMEOUT seconds (on_error "allow"); each
answer carries X-Took-Ms, the time the middleware took to decide it; /health
is exempt (a worker is warmed without asking the store)."""

import os
import time

from ratekeeper import Limiter
from ratekeeper.asgi import RateLimitMiddleware

TIMEOUT = float(os.environ["RK_TIMEOUT"])


async def hello(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"hello"})


LIMITER = Limiter("100000/second", os.environ["RK_STORE"], prefix=os.environ["RK_PREFIX"], timeout=TIMEOUT,
                  connect_timeout=TIMEOUT, on_error="allow")
LIMITED = RateLimitMiddleware(hello, LIMITER, exempt=("/health",))


async def app(scope, receive, send):
    if scope["type"] != "http":
        await LIMITED(scope, receive, send)
        return
    started = time.monotonic()

    async def timed(message):
        if message["type"] == "http.response.start":
            took = (time.monotonic() - started) * 1000
            message = {**message, "headers": [*message.get("headers", []), (b"x-took-ms", f"{took:.1f}".encode())]}
        await send(message)

    await LIMITED(scope, receive, timed)
