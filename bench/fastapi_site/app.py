"""A one-route FastAPI app for the HTTP benchmark, served by uvicorn (one
worker): BENCH_MODE=none (no limiter), ratekeeper (the ASGI middleware),
slowapi (its decorator, moving window) or fastapi_limiter (its dependency,
pyrate-limiter Redis buckets per client), all with the same four rules per
client (X-Forwarded-For), all on the Redis in BENCH_REDIS; BENCH_HEADERS
gives the middleware's header style (default: all).

    BENCH_MODE=ratekeeper BENCH_REDIS=redis://127.0.0.1:6379/0 uvicorn --app-dir bench/fastapi_site app:app
"""

import os
import time

from fastapi import Depends, FastAPI, Request
from fastapi.responses import PlainTextResponse

MODE = os.environ.get("BENCH_MODE", "none")
REDIS = os.environ["BENCH_REDIS"]
FOUR_RULES = "50/second; 1000/minute; 20000/hour; 100000/day"
PREFIX = f"asgibench-{os.getpid()}"

app = FastAPI()
dependencies = []


def client(request: Request) -> str:
    return request.headers.get("x-forwarded-for", "") or (request.client.host if request.client else "")


if MODE == "ratekeeper":
    import ratekeeper
    from ratekeeper.asgi import RateLimitMiddleware

    app.add_middleware(RateLimitMiddleware, limiter=ratekeeper.Limiter(FOUR_RULES, REDIS, prefix=PREFIX),
                       trusted_proxies=["127.0.0.1"], headers=os.environ.get("BENCH_HEADERS") or None)

if MODE == "fastapi_limiter":
    import redis.asyncio
    from fastapi_limiter.depends import RateLimiter
    from pyrate_limiter import Duration, Limiter, Rate, RateItem, RedisBucket
    from pyrate_limiter.abstracts.bucket import BucketFactory

    RATES = [Rate(50, Duration.SECOND), Rate(1000, Duration.MINUTE), Rate(20000, Duration.HOUR),
             Rate(100000, Duration.DAY)]

    class PerClient(BucketFactory):
        """One Redis bucket per client: pyrate-limiter's own bucket is one for every name."""

        def __init__(self) -> None:
            self.redis = redis.asyncio.Redis.from_url(REDIS)
            self.buckets: dict = {}

        def wrap_item(self, name: str, weight: int = 1) -> RateItem:
            return RateItem(name, int(time.time() * 1000), weight=weight)

        async def get(self, item: RateItem):
            bucket = self.buckets.get(item.name)
            if bucket is None:
                bucket = await RedisBucket.init(RATES, self.redis, f"{PREFIX}:{item.name}")
                self.buckets[item.name] = bucket
            return bucket

    async def identifier(request: Request) -> str:
        return client(request)

    dependencies = [Depends(RateLimiter(Limiter(PerClient()), identifier=identifier))]

if MODE == "slowapi":
    from slowapi import Limiter as SlowLimiter
    from slowapi import _rate_limit_exceeded_handler
    from slowapi.errors import RateLimitExceeded

    slow = SlowLimiter(key_func=client, storage_uri=REDIS, strategy="moving-window", key_prefix=PREFIX)
    app.state.limiter = slow
    app.add_exception_handler(RateLimitExceeded, _rate_limit_exceeded_handler)

    @app.get("/")
    @slow.limit(FOUR_RULES)
    async def hello_slow(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

else:

    @app.get("/", dependencies=dependencies)
    async def hello() -> PlainTextResponse:
        return PlainTextResponse("ok")
