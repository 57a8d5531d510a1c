"""Tasks for a real Celery worker (tests/python/test_jobs.py): `partner`
records when its check admitted it (the Redis clock, ms) in the list
RK_RUNS, limited to RK_RULES across every worker thread by
ratekeeper.celery.RateLimitedTask."""

import os

import redis
from celery import Celery

import ratekeeper
from ratekeeper.celery import RateLimitedTask

app = Celery("rk_tasks", broker=os.environ["RK_BROKER"])
app.conf.worker_hijack_root_logger = False
limiter = ratekeeper.Limiter(os.environ["RK_RULES"], os.environ["RK_STORE"], prefix=os.environ["RK_PREFIX"])
runs = redis.Redis.from_url(os.environ["RK_STORE"])


@app.task(base=RateLimitedTask, limiter=limiter, limit_key=lambda n: "partner", name="partner", bind=True)
def partner(self, n: int) -> None:
    admitted_ms = round(self.request.ratekeeper.now * 1000)  # the Redis clock, when the check admitted it
    runs.rpush(os.environ["RK_RUNS"], f"{admitted_ms}:{n}")
