"""A WSGI app behind ratekeeper's WSGI middleware on RK_STORE with a
timeout of RK_TIMEOUT seconds (on_error "allow"); each answer carries
X-Took-Ms, the time the middleware took to decide it."""

import os
import time

from ratekeeper import Limiter
from ratekeeper.wsgi import RateLimitMiddleware

TIMEOUT = float(os.environ["RK_TIMEOUT"])


def hello(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"hello"]


LIMITER = Limiter("100000/second", os.environ["RK_STORE"], prefix=os.environ["RK_PREFIX"], timeout=TIMEOUT,
                  connect_timeout=TIMEOUT, on_error="allow")
LIMITED = RateLimitMiddleware(hello, LIMITER, exempt=("/health",))


def app(environ, start_response):
    started = time.monotonic()

    def timed(status, headers, exc_info=None):
        took = (time.monotonic() - started) * 1000
        return start_response(status, [*headers, ("X-Took-Ms", f"{took:.1f}")], exc_info)

    return LIMITED(environ, timed)
