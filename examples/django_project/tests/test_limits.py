"""The example project's own tests of its limits, with ratekeeper's pytest
plugin: run them with `pytest examples/django_project/tests` (each test
starts with empty memory stores; the clock and the switch are fixtures)."""

import pytest
from django.test import Client


@pytest.fixture(autouse=True)
def memory_store(ratekeeper_settings):
    """settings.RATEKEEPER on the memory store for every test."""


def test_the_sixth_request_in_a_second_is_refused():
    client = Client(REMOTE_ADDR="203.0.113.1")
    assert [client.get("/").status_code for _ in range(6)] == [200] * 5 + [429]


def test_the_limit_lifts_when_the_clock_moves_on(ratekeeper_clock):
    client = Client(REMOTE_ADDR="203.0.113.1")
    assert [client.get("/").status_code for _ in range(6)] == [200] * 5 + [429]
    ratekeeper_clock.advance(1)
    assert client.get("/").status_code == 200


def test_login_attempts_per_email(ratekeeper_clock):
    client = Client(REMOTE_ADDR="203.0.113.2")
    statuses = [client.post("/login", {"email": "Ann@Example.com"}).status_code for _ in range(4)]
    assert statuses == [401, 401, 401, 429]
    ratekeeper_clock.advance(300)
    assert client.post("/login", {"email": "ann@example.com"}).status_code == 401


def test_nothing_is_limited_when_switched_off(ratekeeper_disabled):
    client = Client(REMOTE_ADDR="203.0.113.1")
    assert {client.get("/").status_code for _ in range(20)} == {200}
