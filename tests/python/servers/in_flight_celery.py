"""A Celery task that calls a slow upstream (RK_UPSTREAM) holding a slot of
RK_RULES ("2 concurrent; ...") on the Redis RK_STORE, across every worker
process: the key RK_KEY ("upstream" unless given) in the scope RK_SCOPE (the
task's own unless given: another door's, to share its slots). Run:
RK_BROKER=... RK_STORE=... RK_RULES=... RK_PREFIX=... RK_UPSTREAM=... celery
-A in_flight_celery worker (from this directory)."""

import os
import urllib.request

from celery import Celery

import ratekeeper
from ratekeeper.celery import RateLimitedTask

app = Celery("in_flight", broker=os.environ["RK_BROKER"])
limiter = ratekeeper.Limiter(os.environ["RK_RULES"], os.environ["RK_STORE"], prefix=os.environ["RK_PREFIX"], lease=10)


@app.task(base=RateLimitedTask, limiter=limiter, limit_key=lambda n: os.environ.get("RK_KEY", "upstream"),
          limit_scope=os.environ.get("RK_SCOPE"), name="upstream")
def upstream(n: int) -> None:
    urllib.request.urlopen(f"{os.environ['RK_UPSTREAM']}?n={n}").read()
