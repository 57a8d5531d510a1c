"""The example Django project under uvicorn, with a watch on its event loop:
a task that sleeps 5 ms at a time records the longest it overslept. GET
/_stall answers that (in seconds) and starts a new measure; everything else
goes to Django, whose ratekeeper middleware runs on every request."""

import asyncio
import json
import time

from django.core.asgi import get_asgi_application

django_app = get_asgi_application()
_longest = [0.0]
_watch = []


async def _watch_the_loop() -> None:
    last = time.monotonic()
    while True:
        await asyncio.sleep(0.005)
        now = time.monotonic()
        _longest[0] = max(_longest[0], now - last - 0.005)
        last = now


async def app(scope, receive, send):
    if scope["type"] == "http" and not _watch:
        _watch.append(asyncio.ensure_future(_watch_the_loop()))
    if scope["type"] == "http" and scope["path"] == "/_stall":
        body = json.dumps({"longest": _longest[0]}).encode()
        _longest[0] = 0.0
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})
        return
    await django_app(scope, receive, send)
