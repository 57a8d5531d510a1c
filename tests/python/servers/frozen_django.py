"""The example Django project (servers/django_wsgi.py) with each answer
carrying X-Took-Ms, the time Django took to answer it (its middleware's
decision on RATEKEEPER_STORE included)."""

import time

from django_wsgi import app as django_app


def app(environ, start_response):
    started = time.monotonic()

    def timed(status, headers, exc_info=None):
        took = (time.monotonic() - started) * 1000
        return start_response(status, [*headers, ("X-Took-Ms", f"{took:.1f}")], exc_info)

    return django_app(environ, timed)
