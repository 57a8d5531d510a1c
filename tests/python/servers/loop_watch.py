"""A watch on an ASGI server's event loop: a task that sleeps 5 ms at a time
records the longest it overslept. `watched(app)` serves GET /_stall with
that (in seconds), starting a new measure, and everything else with `app`."""

import asyncio
import json
import time

_longest = [0.0]
_watch: list = []


async def _watch_the_loop() -> None:
    last = time.monotonic()
    while True:
        await asyncio.sleep(0.005)
        now = time.monotonic()
        _longest[0] = max(_longest[0], now - last - 0.005)
        last = now


def watched(inner):
    """`inner`, with GET /_stall answering the longest stall since the last ask."""

    async def app(scope, receive, send):
        if scope["type"] == "http" and not _watch:
            _watch.append(asyncio.ensure_future(_watch_the_loop()))
        if scope["type"] == "http" and scope["path"] == "/_stall":
            body = json.dumps({"longest": _longest[0]}).encode()
            _longest[0] = 0.0
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": body})
            return
        await inner(scope, receive, send)

    return app
