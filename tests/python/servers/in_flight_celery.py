"""A Celery task that calls a slow upstream (RK_UPSTREAM) holding a slot of
RK_RULES ("2 concurrent; ...") on the Redis RK_STORE, across every worker
process. Run: RK_BROKER=... RK_STORE=... RK_RULES=... RK_PREFIX=...
RK_UPSTREAM=... celery -A in_flight_celery worker (from this directory)."""

import os
import urllib.request

from celery import Celery

import ratekeeper
from ratekeeper.celery import RateLimitedTask

app = Celery("in_flight", broker=os.environ["RK_BROKER"])
limiter = ratekeeper.Limiter(os.environ["RK_RULES"], os.environ["RK_STORE"], prefix=os.environ["RK_PREFIX"], lease=10)


@app.task(base=RateLimitedTask, limiter=limiter, limit_key=lambda n: "upstream", name="upstream")
def upstream(n: int) -> None:
    urllib.request.urlopen(f"{os.environ['RK_UPSTREAM']}?n={n}").read()
