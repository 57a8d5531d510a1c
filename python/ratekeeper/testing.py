"""Helpers for testing an application that uses ratekeeper, and a pytest
plugin (loaded by pytest on its own once ratekeeper is installed).

    def test_login_is_limited(client, ratekeeper_clock):
        for _ in range(5):
            client.post("/login", {"email": "a@b.c"})
        assert client.post("/login", {"email": "a@b.c"}).status_code == 429
        ratekeeper_clock.advance(300)           # five minutes on
        assert client.post("/login", {"email": "a@b.c"}).status_code != 429

    def test_without_limits(client, ratekeeper_disabled):
        ...                                      # every check admitted

Every test starts with the memory stores of the process empty, so counts
never leak from one test into the next (use the memory store in tests; for
Django, the ``ratekeeper_settings`` fixture does it). The clock and the
switch are process-wide: they act on every limiter, middleware and
decorator of the app under test, with no store asked while disabled.
"""

import contextlib
from typing import Any, Iterator

import pytest

from ratekeeper import _ratekeeper

START = 1_700_000_000.0


class Clock:
    """The frozen clock of checks: ``now``, ``advance(seconds)``, ``set(now)``."""

    def __init__(self, now: float = START) -> None:
        self.set(now)

    @property
    def now(self) -> float:
        """The frozen time, in seconds since the epoch."""
        return _ratekeeper._testing_frozen() or 0.0

    def set(self, now: float) -> None:
        """Freezes the clock at ``now``."""
        _ratekeeper._testing_freeze(float(now))

    def advance(self, seconds: float) -> None:
        """Moves the clock ``seconds`` on."""
        self.set(self.now + seconds)


@contextlib.contextmanager
def frozen_clock(now: float = START) -> Iterator[Clock]:
    """Every check without an explicit ``now`` is taken at the clock's time, until the block ends."""
    try:
        yield Clock(now)
    finally:
        _ratekeeper._testing_freeze(None)


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Every check is admitted without asking a store, until the block ends."""
    _ratekeeper._testing_disable(True)
    try:
        yield
    finally:
        _ratekeeper._testing_disable(False)


def reset() -> None:
    """Empties every memory store of this process (at its next use)."""
    _ratekeeper._testing_reset()


@pytest.fixture(autouse=True)
def ratekeeper_reset() -> None:
    """Every test starts with the process's memory stores empty."""
    reset()


@pytest.fixture
def ratekeeper_clock() -> Iterator[Clock]:
    """A frozen clock for this test (see ``Clock``)."""
    with frozen_clock() as clock:
        yield clock


@pytest.fixture
def ratekeeper_disabled() -> Iterator[None]:
    """Limiting switched off for this test."""
    with disabled():
        yield


@pytest.fixture
def ratekeeper_settings() -> Iterator[Any]:
    """Django: settings.RATEKEEPER on the memory store for this test (a
    fresh one: the limiters are made again), with ``override_settings``;
    yields the dict, which a test may change with ``override_settings`` too."""
    from django.conf import settings
    from django.test import override_settings

    config = dict(getattr(settings, "RATEKEEPER", None) or {}, STORE="memory://")
    with override_settings(RATEKEEPER=config):
        yield config
