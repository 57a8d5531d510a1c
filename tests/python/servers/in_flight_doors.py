"""The in-flight doors' apps, each limited by the policy file IN_FLIGHT_POLICY
(a throttle "partner" of "3 concurrent" keyed by the query's account):
`wsgi` (the WSGI middleware, for gunicorn), `asgi` (FastAPI behind the ASGI
middleware, for uvicorn) and `django` (the Django middleware by the settings'
POLICY_FILE, for gunicorn). Each answers

- /call: after calling the slow upstream UPSTREAM (while it holds its slot);
- /stream: 20 chunks, 100 ms apart (a client may hang up in the middle);
- /boom: by raising (the slot is given back all the same);
- /health: ok, never limited.

The Django app also has /dstream and /dboom, limited by @ratelimit("3
concurrent", key="get:account", group="dstream") alone.
"""

import os
import time
import urllib.request
from typing import Iterator

POLICY = os.environ["IN_FLIGHT_POLICY"]
CHUNKS, EVERY = 20, 0.1


def upstream() -> bytes:
    with urllib.request.urlopen(os.environ["UPSTREAM"], timeout=30) as response:
        return response.read()


def chunks() -> Iterator[bytes]:
    for i in range(CHUNKS):
        yield b"chunk %d\n" % i
        time.sleep(EVERY)


def plain(environ, start_response):
    path = environ.get("PATH_INFO", "")
    if path == "/boom":
        raise RuntimeError("boom")
    start_response("200 OK", [("Content-Type", "text/plain")])
    if path == "/stream":
        return chunks()
    return [upstream() if path == "/call" else b"ok"]


def wsgi_app():
    from ratekeeper.wsgi import RateLimitMiddleware

    return RateLimitMiddleware(plain, policy=POLICY)


def asgi_app():
    import asyncio

    from fastapi import FastAPI
    from fastapi.responses import PlainTextResponse, StreamingResponse

    from ratekeeper.asgi import RateLimitMiddleware

    app = FastAPI()
    app.add_middleware(RateLimitMiddleware, policy=POLICY)

    @app.get("/call")
    def call() -> PlainTextResponse:  # (a thread of the pool, as a blocking client is run)
        return PlainTextResponse(upstream())

    @app.get("/stream")
    async def stream() -> StreamingResponse:
        async def body():
            for i in range(CHUNKS):
                yield b"chunk %d\n" % i
                await asyncio.sleep(EVERY)

        return StreamingResponse(body(), media_type="text/plain")

    @app.get("/boom")
    async def boom() -> None:
        raise RuntimeError("boom")

    @app.get("/health")
    async def health() -> PlainTextResponse:
        return PlainTextResponse("ok")

    return app


def django_app():
    from django.conf import settings

    settings.configure(
        SECRET_KEY="test-only", DEBUG=False, ALLOWED_HOSTS=["*"], ROOT_URLCONF=__name__,
        INSTALLED_APPS=["ratekeeper.django"],
        MIDDLEWARE=["ratekeeper.django.middleware.RateLimitMiddleware"],
        RATEKEEPER={"POLICY_FILE": POLICY},
    )
    import django
    from django.core.wsgi import get_wsgi_application
    from django.http import HttpResponse, StreamingHttpResponse
    from django.urls import path

    from ratekeeper.django import ratelimit

    django.setup()

    def boom(request):
        raise RuntimeError("boom")

    def stream(request):
        return StreamingHttpResponse(chunks(), content_type="text/plain")

    limited = ratelimit("3 concurrent", key="get:account", group="dstream")

    global urlpatterns
    urlpatterns = [
        path("call", lambda request: HttpResponse(upstream(), content_type="text/plain")),
        path("stream", stream),
        path("boom", boom),
        path("dstream", limited(stream)),
        path("dboom", limited(boom)),
        path("health", lambda request: HttpResponse("ok")),
    ]
    return get_wsgi_application()


urlpatterns: list = []
DOOR = os.environ.get("IN_FLIGHT_DOOR")
if DOOR == "wsgi":
    wsgi = wsgi_app()
elif DOOR == "asgi":
    asgi = asgi_app()
elif DOOR == "django":
    django = django_app()
