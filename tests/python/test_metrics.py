"""Metrics through a real request cycle: the limiters' counters, the
Prometheus collector, the Django signal and the one log line per denial."""

import logging

import pytest
from django.test import Client, override_settings
from prometheus_client import CollectorRegistry, generate_latest

from conftest import unique_prefix
from ratekeeper import Limiter
from ratekeeper.django.conf import get_config
from ratekeeper.django.metrics import collector
from ratekeeper.django.signals import rate_limited
from ratekeeper.metrics import RateKeeperCollector


@pytest.fixture
def settings_override(redis_url):
    from django.conf import settings

    config = dict(settings.RATEKEEPER, STORE=redis_url, PREFIX=unique_prefix(), RULES="3/minute; 10/hour")
    with override_settings(RATEKEEPER=config):
        yield config


def test_a_django_request_cycle_is_counted(settings_override, caplog):
    seen = []
    receiver = lambda sender, request, decision, scope, **kwargs: seen.append((scope, decision.allowed))  # noqa: E731
    rate_limited.connect(receiver)
    try:
        c = Client(REMOTE_ADDR="198.51.100.200")
        with caplog.at_level(logging.INFO, logger="ratekeeper.denials"):
            statuses = [c.get("/").status_code for _ in range(5)]
    finally:
        rate_limited.disconnect(receiver)
    assert statuses == [200, 200, 200, 429, 429]
    stats = get_config().limiters()["default"].stats
    assert (stats["allowed"], stats["denied"], stats["errors"]) == (3, 2, 0)
    assert stats["peak_used"] == {60.0: 3, 3600.0: 3}
    assert seen == [("default", False), ("default", False)]

    lines = [r.getMessage() for r in caplog.records if r.name == "ratekeeper.denials"]
    assert len(lines) == 2
    assert 'scope="default"' in lines[0] and 'path="/"' in lines[0] and 'limit=3' in lines[0]
    assert "198.51.100.200" not in lines[0] and 'key="sha256:' in lines[0]

    registry = CollectorRegistry()
    registry.register(collector())
    text = generate_latest(registry).decode()
    assert 'ratekeeper_checks_total{limiter="default",outcome="allowed"} 3.0' in text
    assert 'ratekeeper_checks_total{limiter="default",outcome="denied"} 2.0' in text
    assert 'ratekeeper_peak_used{limiter="default",window="60s"} 3.0' in text


def test_keys_are_logged_as_they_are_when_asked(settings_override, caplog):
    with override_settings(RATEKEEPER=dict(settings_override, LOG_KEYS=True, LOG_LEVEL="WARNING", RULES="1/minute")):
        c = Client(REMOTE_ADDR="198.51.100.201")
        with caplog.at_level(logging.INFO, logger="ratekeeper.denials"):
            c.get("/")
            c.get("/")
    records = [r for r in caplog.records if r.name == "ratekeeper.denials"]
    assert len(records) == 1 and records[0].levelno == logging.WARNING
    assert 'key="ip:198.51.100.201"' in records[0].getMessage()
    assert records[0].ratekeeper["scope"] == "default"


def test_collector_over_plain_limiters(redis_url):
    limiter = Limiter("2/hour", redis_url, prefix=unique_prefix())
    for _ in range(4):
        limiter.check("k")
    registry = CollectorRegistry()
    registry.register(RateKeeperCollector({"api": limiter}))
    text = generate_latest(registry).decode()
    assert 'ratekeeper_checks_total{limiter="api",outcome="allowed"} 2.0' in text
    assert 'ratekeeper_checks_total{limiter="api",outcome="denied"} 2.0' in text
    assert 'ratekeeper_cached_denials_total{limiter="api"} 1.0' in text
    assert 'ratekeeper_peak_used{limiter="api",window="3600s"} 2.0' in text


def test_bad_log_level_is_a_configuration_error(settings_override):
    from django.core.checks import run_checks

    with override_settings(RATEKEEPER=dict(settings_override, LOG_LEVEL="LOUD")):
        assert any("LOG_LEVEL" in e.msg for e in run_checks() if e.id == "ratekeeper.E005")
