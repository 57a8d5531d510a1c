"""A Celery task limited by ratekeeper: `partner` runs at most RK_RULES (say
"20/second") across every worker thread and process, on the Redis RK_STORE;
it records when its check admitted it (the Redis clock, ms) in the list
RK_RUNS. Run: RK_BROKER=... RK_STORE=... RK_RULES=20/second RK_RUNS=runs
RK_PREFIX=jobs celery -A partner_celery worker (from examples/jobs)."""

import os

import redis
from celery import Celery

import ratekeeper
from ratekeeper.celery import RateLimitedTask

app = Celery("partner", broker=os.environ["RK_BROKER"])
limiter = ratekeeper.Limiter(os.environ["RK_RULES"], os.environ["RK_STORE"], prefix=os.environ["RK_PREFIX"])
runs = redis.Redis.from_url(os.environ["RK_STORE"])


@app.task(base=RateLimitedTask, limiter=limiter, limit_key=lambda n: "partner", name="partner", bind=True)
def partner(self, n: int) -> None:
    admitted_ms = round(self.request.ratekeeper.now * 1000)
    runs.rpush(os.environ["RK_RUNS"], f"{admitted_ms}:{n}")
