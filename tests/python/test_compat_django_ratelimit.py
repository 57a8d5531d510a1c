"""ratekeeper.compat.django_ratelimit as an app that swapped its import
uses it: a view decorated the django-ratelimit way under gunicorn sharing
its quota with a Rack throttle under puma over real HTTP, the settings it
reads, async views, the middleware, a store that fails, hostile keys.
(django-ratelimit's own suite: test_django_ratelimit_suite.py.)"""

import asyncio
import json
import time
from pathlib import Path

import pytest
from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpResponse
from django.test import RequestFactory, override_settings

from conftest import ROOT, free_port, unique_prefix
from edge import gunicorn_django, puma_rack, request, stop_all
from ratekeeper import Admin
from ratekeeper.compat.django_ratelimit import UNSAFE
from ratekeeper.compat.django_ratelimit.core import _split_rate, get_usage, is_ratelimited
from ratekeeper.compat.django_ratelimit.decorators import ratelimit
from ratekeeper.compat.django_ratelimit.exceptions import Ratelimited
from ratekeeper.compat.django_ratelimit.middleware import RatelimitMiddleware

rf = RequestFactory()
REDIS_CACHE = "django.core.cache.backends.redis.RedisCache"
LOCMEM_CACHE = "django.core.cache.backends.locmem.LocMemCache"


class AppRedisCache(RedisCache):
    """An app's own Redis cache backend (a subclass of Django's)."""


def on_redis(url: str, prefix: str, **more):
    """Settings whose default cache is the Redis at `url` (the store), under `prefix`."""
    return override_settings(CACHES={"default": {"BACKEND": REDIS_CACHE, "LOCATION": url}},
                             RATELIMIT_CACHE_PREFIX=prefix, **more)


@pytest.mark.ruby
@pytest.mark.parametrize("rack", ["ratekeeper", "rack-attack"])
def test_a_view_decorated_the_django_ratelimit_way_shares_a_quota_with_rack(rack, tmp_path, redis_url):
    """gunicorn (2 workers) serves a view under @ratelimit(group="api",
    key="header:x-api-key", rate="5/m"); puma (2 workers) a Rack app whose
    throttle "api" is 5/minute per X-Api-Key in ratekeeper's DSL, or a Rails
    6.1 app whose rack-attack initializer says so (ratekeeper/rack_attack,
    tests/ruby/servers/rails_attack): one prefix on one Redis, one quota. Ten requests alternating between them: exactly five pass."""
    prefix = unique_prefix()
    started = []
    try:
        django, django_port = gunicorn_django(tmp_path, "django-ratelimit", redis_url, prefix, rules="5/m")
        started.append(django)
        if rack == "rack-attack":
            app = str(Path(ROOT) / "tests" / "ruby" / "servers" / "rails_attack" / "config.ru")
            rack_app, rack_port = puma_rack(tmp_path, "rack-attack", redis_url, prefix, app=app, probe="/assets/warm")
        else:
            rack_app, rack_port = puma_rack(tmp_path, "direct", redis_url, prefix, rules="5/minute")
        started.append(rack_app)
        answers = [request((django_port, rack_port)[i % 2], "/api/items", {"X-Api-Key": "k1"})
                   for i in range(10)]
        other = request(django_port, "/api/items", {"X-Api-Key": "k2"})
    finally:
        stop_all(*started)
    statuses = [a[0] for a in answers]
    assert statuses == [200] * 5 + [429] * 5, [(a[0], a[2][:60]) for a in answers]
    assert answers[6][2] == b"django django-ratelimit limited", "RATELIMIT_VIEW answered Django's denial"
    if rack == "rack-attack":
        assert json.loads(answers[5][2])["throttle"] == "api", "the throttled responder answered Rack's"
    assert other[0] == 200, "another key has a quota of its own"


def test_rates_keys_and_methods(redis_url):
    assert [_split_rate(r) for r in ("5/m", "100/10s", "100/10", "2/h", "1/d")] == \
        [(5, 60), (100, 10), (100, 10), (2, 3600), (1, 86400)]
    with pytest.raises(ImproperlyConfigured, match="invalid rate '5/week'"):
        _split_rate("5/week")
    with on_redis(redis_url, unique_prefix()):
        @ratelimit(key="post:email", rate="1/m", method=UNSAFE, block=False)
        def login(request):
            return request.limited

        assert login(rf.post("/", {"email": "a@x.io"})) is False
        assert login(rf.post("/", {"email": "a@x.io"})) is True
        assert login(rf.post("/", {"email": "b@x.io"})) is False, "one quota per key"
        assert login(rf.get("/")) is False, "GET is not limited"
        assert login(rf.post("/", {})) is False, "no key: not limited"
        with pytest.raises(ImproperlyConfigured, match="unknown key 'cookie:a'"):
            is_ratelimited(rf.get("/"), group="g", key="cookie:a", rate="1/m", increment=True)
        with pytest.raises(ImproperlyConfigured, match="group or a function"):
            get_usage(rf.get("/"), key="ip", rate="1/m")
        with override_settings(RATELIMIT_ENABLE=False):
            assert not any(is_ratelimited(rf.get("/"), group="off", key="ip", rate="1/m", increment=True)
                           for _ in range(3))


def test_usage_counts_and_peeks(redis_url):
    with on_redis(redis_url, unique_prefix()):
        usage = dict(group="u", key="ip", rate="2/m")
        first = get_usage(rf.get("/"), increment=True, **usage)
        assert (first["count"], first["limit"], first["should_limit"]) == (1, 2, False)
        assert first["decision"].allowed and 0 < first["time_left"] <= 60
        assert get_usage(rf.get("/"), **usage)["count"] == 1, "a peek counts nothing"
        get_usage(rf.get("/"), increment=True, **usage)
        peek = get_usage(rf.get("/"), **usage)
        assert (peek["count"], peek["should_limit"]) == (2, True), "the next one would be refused"
        refused = get_usage(rf.get("/"), increment=True, **usage)
        assert (refused["count"], refused["should_limit"]) == (3, True)
        assert 0 < refused["time_left"] <= 60


def test_a_listed_address_is_limited(redis_url):
    prefix = unique_prefix()
    Admin(redis_url, prefix=prefix).block("198.51.100.9", ttl=60, reason="test")
    with on_redis(redis_url, prefix):
        request = rf.get("/", REMOTE_ADDR="198.51.100.9", HTTP_X_K="k")
        deadline = time.monotonic() + 5  # the address lists are read again within 2 s
        while not is_ratelimited(request, group="listed", key="header:x-k", rate="100/m", increment=True):
            assert time.monotonic() < deadline, "a blocked address was never limited"
            time.sleep(0.1)
        other = rf.get("/", REMOTE_ADDR="198.51.100.10", HTTP_X_K="k")
        assert not is_ratelimited(other, group="listed", key="header:x-k", rate="100/m", increment=True)


def test_ip_settings():
    with override_settings(CACHES={"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}},
                           RATELIMIT_IP_META_KEY="HTTP_X_REAL_IP", RATELIMIT_IPV6_MASK=48):
        def req(ip):
            return rf.get("/", HTTP_X_REAL_IP=ip)

        group = unique_prefix()
        check = dict(group=group, key="ip", rate="1/m", increment=True)
        assert not is_ratelimited(req("2001:db8:1:2::1"), **check)
        assert is_ratelimited(req("2001:db8:1:3::1"), **check), "one /48"
        assert not is_ratelimited(req("2001:db8:2::1"), **check)
        with pytest.raises(ImproperlyConfigured, match="RATELIMIT_IP_META_KEY"):
            is_ratelimited(rf.get("/"), **check)
        with override_settings(RATELIMIT_IPV4_MASK=8):
            with pytest.raises(ImproperlyConfigured, match="RATELIMIT_IPV4_MASK"):
                is_ratelimited(req("10.0.0.1"), **check)


def test_an_unreachable_store_follows_fail_open():
    closed = f"redis://127.0.0.1:{free_port()}/0"
    check = dict(group="down", key="ip", rate="100/m", increment=True)
    with on_redis(closed, unique_prefix()):
        started = time.monotonic()
        assert is_ratelimited(rf.get("/"), **check), "closed by default"
        with override_settings(RATELIMIT_FAIL_OPEN=True):
            assert not is_ratelimited(rf.get("/"), **check)
        assert time.monotonic() - started < 10
    with override_settings(CACHES={"default": {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
                                               "LOCATION": "/tmp/unused"}}):
        with pytest.raises(ImproperlyConfigured, match="cannot hold exact windows"):
            is_ratelimited(rf.get("/"), **check)


def test_a_read_the_store_cannot_answer_counts_nothing():
    """As django-ratelimit reads a failing cache: a read (increment=False)
    is not limited, whatever RATELIMIT_FAIL_OPEN says; only a counted
    request fails closed."""
    with on_redis(f"redis://127.0.0.1:{free_port()}/0", unique_prefix()):
        read = dict(group="down-read", key="ip", rate="1/m")
        assert get_usage(rf.get("/"), **read) == {"count": 0, "limit": 1, "should_limit": False, "time_left": 60,
                                                  "decision": None}
        assert not is_ratelimited(rf.get("/"), **read)
        assert is_ratelimited(rf.get("/"), increment=True, **read), "a counted request is limited"
        with override_settings(RATELIMIT_FAIL_OPEN=True):
            assert not is_ratelimited(rf.get("/"), **read)


def test_clearing_a_local_memory_cache_resets_its_counts():
    """cache.clear() (an app's test setUp) resets the counts kept for that
    cache, as it resets django-ratelimit's, and only for that cache."""
    where = unique_prefix()
    with override_settings(CACHES={"default": {"BACKEND": LOCMEM_CACHE, "LOCATION": f"{where}-a"},
                                   "other": {"BACKEND": LOCMEM_CACHE, "LOCATION": f"{where}-b"}}):
        check = dict(group="cleared", key="ip", rate="1/m", increment=True)
        assert [is_ratelimited(rf.get("/"), **check) for _ in range(2)] == [False, True]
        with override_settings(RATELIMIT_USE_CACHE="other"):
            assert [is_ratelimited(rf.get("/"), **check) for _ in range(2)] == [False, True]
        caches["default"].set("app", "entry")
        caches["default"].clear()
        assert [is_ratelimited(rf.get("/"), **check) for _ in range(2)] == [False, True], "counts reset"
        with override_settings(RATELIMIT_USE_CACHE="other"):
            assert is_ratelimited(rf.get("/"), **check), "the other cache was not cleared: its counts hold"
        assert is_ratelimited(rf.get("/"), **check), "counting goes on after the reset"


def test_a_dummy_cache_keeps_nothing():
    """A DummyCache ("instant expiration"): every count expires at once, so
    nothing is limited but a rate of 0, as with django-ratelimit."""
    with override_settings(CACHES={"default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}}):
        @ratelimit(key="ip", rate="1/m")
        def view(request):
            return HttpResponse("ok")

        assert [view(rf.get("/")).status_code for _ in range(3)] == [200] * 3
        usage = get_usage(rf.get("/"), group="dummy", key="ip", rate="1/m", increment=True)
        assert (usage["count"], usage["limit"], usage["should_limit"]) == (1, 1, False)
        assert is_ratelimited(rf.get("/"), group="dummy", key="ip", rate="0/m", increment=True)
        assert not is_ratelimited(rf.get("/"), group="dummy", key="ip", rate="0/m"), "a read counts nothing"


def test_a_subclass_of_a_known_backend_is_that_backend(redis_url):
    prefix = unique_prefix()
    backend = f"{__name__}.AppRedisCache"
    with override_settings(CACHES={"default": {"BACKEND": backend, "LOCATION": redis_url}},
                           RATELIMIT_CACHE_PREFIX=prefix):
        check = dict(group="subclass", key="ip", rate="1/m", increment=True)
        assert [is_ratelimited(rf.get("/"), **check) for _ in range(2)] == [False, True]
    with on_redis(redis_url, prefix):
        assert is_ratelimited(rf.get("/"), **check), "the same Redis, the same counts"


def test_hostile_keys_are_limited_each_exactly(redis_url):
    with on_redis(redis_url, unique_prefix()):
        keys = ["caf\xe9\xff", "a\x00b", "a\r\nSet-Cookie: x=1", "a\r\nSet-Cookie: x=2"]
        for value in keys:
            req = rf.get("/", HTTP_X_K=value)
            results = [is_ratelimited(req, group="hostile", key="header:x-k", rate="2/m", increment=True)
                       for _ in range(3)]
            assert results == [False, False, True], repr(value)


def test_async_views_and_the_middleware(redis_url):
    with on_redis(redis_url, unique_prefix(), RATELIMIT_VIEW="test_compat_django_ratelimit.too_many"):
        @ratelimit(key="ip", rate="1/m")
        async def view(request):
            return HttpResponse("ok")

        middleware = RatelimitMiddleware(lambda request: HttpResponse("unused"))

        async def two():
            first = await view(rf.get("/"))
            with pytest.raises(Ratelimited) as raised:
                await view(rf.get("/"))
            return first, raised.value

        first, error = asyncio.run(two())
        assert first.status_code == 200
        answer = middleware.process_exception(rf.get("/"), error)
        assert (answer.status_code, answer.content) == (429, b"slow down")
        assert middleware.process_exception(rf.get("/"), ValueError()) is None


def too_many(request, exception):
    """RATELIMIT_VIEW of the middleware test."""
    return HttpResponse("slow down", status=429)
