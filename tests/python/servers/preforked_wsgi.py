"""A WSGI app whose Limiter is built, and used, at import: under gunicorn
--preload that happens in the master, before it forks the workers, so the
workers inherit a limiter with an open Redis connection and pool threads.

GET /<key> checks <key> (RK_RULES, default 50/minute) and answers the decision
as JSON, with the pid of the worker that made it."""

import json
import os

import ratekeeper

LIMITER = ratekeeper.Limiter(os.environ.get("RK_RULES", "50/minute"), os.environ["RK_STORE"],
                             prefix=os.environ["RK_PREFIX"])
assert not LIMITER.check("import-time").degraded, "Redis did not answer at import"


def app(environ, start_response):
    key = environ.get("PATH_INFO", "/").strip("/") or "default"
    decision = LIMITER.check(key)
    body = json.dumps({"allowed": decision.allowed, "degraded": decision.degraded, "pid": os.getpid()}).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]
