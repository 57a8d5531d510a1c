"""A one-view Django site for the HTTP benchmark, served by gunicorn:
BENCH_MODE=none (no limiter), ping (no limiter, and one redis-py PING per
request: the floor of any limiter that asks Redis), ratekeeper (the
middleware, four rules) or django_ratelimit (four stacked decorators), all
keyed by X-Forwarded-For, all on the Redis in BENCH_REDIS (ratekeeper also
on memory://, its memory store).

    BENCH_MODE=ratekeeper BENCH_REDIS=redis://127.0.0.1:6379/0 gunicorn benchsite:application
"""

import os

import django
from django.conf import settings
from django.core.wsgi import get_wsgi_application
from django.http import HttpResponse
from django.urls import path

MODE = os.environ.get("BENCH_MODE", "none")
REDIS = os.environ["BENCH_REDIS"]
FOUR_RULES = "50/second; 1000/minute; 20000/hour; 100000/day"

middleware = []
apps = []
if MODE == "ratekeeper":
    apps = ["ratekeeper.django"]
    middleware = ["ratekeeper.django.middleware.RateLimitMiddleware"]

settings.configure(
    DEBUG=False,
    SECRET_KEY="bench",
    ALLOWED_HOSTS=["*"],
    ROOT_URLCONF=__name__,
    INSTALLED_APPS=apps,
    MIDDLEWARE=middleware,
    CACHES={"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS}}
    if REDIS.startswith("redis") else {},
    RATEKEEPER={
        "STORE": REDIS,
        "PREFIX": f"httpbench-{os.getpid()}",
        "RULES": FOUR_RULES,
        "KEY": "ip",
        "TRUSTED_PROXIES": ["127.0.0.1"],
    },
)
django.setup()


def hello(request):
    return HttpResponse("ok")


if MODE == "ping":
    import redis

    client = redis.Redis.from_url(REDIS)

    def hello(request):  # noqa: F811 - the same view, one round trip first
        client.ping()
        return HttpResponse("ok")

if MODE == "django_ratelimit":
    from django_ratelimit.decorators import ratelimit

    for rate in ["50/s", "1000/m", "20000/h", "100000/d"]:
        hello = ratelimit(key="header:x-forwarded-for", rate=rate, block=True)(hello)

urlpatterns = [path("", hello)]
application = get_wsgi_application()
