"""A WSGI app behind ratekeeper's WSGI middleware: 5/second; 20/minute per
client IP, in scope "wsgi", on RK_STORE with RK_PREFIX, headers in the style
RK_HEADERS. Every request that gets through is answered "hello"."""

import os

from ratekeeper import Limiter
from ratekeeper.wsgi import RateLimitMiddleware


def hello(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"hello"]


LIMITER = Limiter("5/second; 20/minute", os.environ["RK_STORE"], prefix=os.environ["RK_PREFIX"], scope="wsgi")
app = RateLimitMiddleware(hello, LIMITER, headers=os.environ.get("RK_HEADERS"))
