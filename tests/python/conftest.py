"""Shared fixtures: the test Redis (started by scripts/test), unique prefixes,
and the example Django project configured against that Redis."""

import itertools
import os
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REDIS_URL = os.environ.get("RATEKEEPER_TEST_REDIS", "redis://127.0.0.1:6379/0")
_counter = itertools.count()


def redis_targets():
    """(name, URL) of the test Redis and, when scripts/test started one, the Cluster."""
    found = [("redis", REDIS_URL)]
    if os.environ.get("RATEKEEPER_TEST_CLUSTER"):
        found.append(("cluster", os.environ["RATEKEEPER_TEST_CLUSTER"]))
    return found


def unique_prefix() -> str:
    """A Redis key prefix no other test uses."""
    return f"pytest-{os.getpid()}-{time.time_ns()}-{next(_counter)}"


def pytest_configure(config):
    sys.path.insert(0, os.path.join(ROOT, "examples", "django_project"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demo.settings")
    os.environ["RATEKEEPER_STORE"] = REDIS_URL
    os.environ["RATEKEEPER_PREFIX"] = unique_prefix()
    import django

    django.setup()


@pytest.fixture(scope="session")
def redis_url() -> str:
    import redis

    try:
        redis.Redis.from_url(REDIS_URL).ping()
    except Exception as exc:  # pragma: no cover - environment problem
        pytest.fail(f"no Redis at {REDIS_URL} ({exc}): run `bash scripts/test`, which starts one")
    return REDIS_URL


@pytest.fixture
def prefix() -> str:
    return unique_prefix()


@pytest.fixture(params=["memory", "redis", "cluster"])
def store(request, redis_url) -> str:
    """Each test using it runs on every store: memory, Redis, and the Redis
    Cluster that scripts/test starts (RATEKEEPER_TEST_CLUSTER)."""
    if request.param == "cluster":
        url = os.environ.get("RATEKEEPER_TEST_CLUSTER")
        if not url:
            pytest.skip("RATEKEEPER_TEST_CLUSTER is not set (scripts/test sets it)")
        return url
    return "memory://" if request.param == "memory" else redis_url
