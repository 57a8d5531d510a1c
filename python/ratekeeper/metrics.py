"""Metrics for Prometheus: a `prometheus_client` collector over limiters'
counters (the optional extra: `pip install "ratekeeper[metrics]"`).

    from prometheus_client import REGISTRY
    from ratekeeper.metrics import RateKeeperCollector
    REGISTRY.register(RateKeeperCollector({"api": api_limiter, "login": login_limiter}))

Exposes `ratekeeper_checks_total{limiter, outcome}` (outcome: allowed, denied,
fail_open, fail_closed), `ratekeeper_cached_denials_total{limiter}`,
`ratekeeper_store_errors_total{limiter}` and `ratekeeper_peak_used{limiter,
window}` (the most units seen in use in a window by any key).
"""

from typing import Any, Callable, Iterator, Mapping, Union

from ratekeeper._ratekeeper import Limiter

Limiters = Union[Mapping[str, Limiter], Callable[[], Mapping[str, Limiter]]]
OUTCOMES = ("allowed", "denied", "fail_open", "fail_closed")


class RateKeeperCollector:
    """Collects the counters of named limiters (a mapping, or a callable
    returning one, read at every scrape)."""

    def __init__(self, limiters: Limiters) -> None:
        self._limiters = limiters if callable(limiters) else (lambda: limiters)

    def collect(self) -> Iterator[Any]:
        """The metric families, as prometheus_client asks for them."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        checks = CounterMetricFamily("ratekeeper_checks", "Checks decided, by outcome.", labels=["limiter", "outcome"])
        cached = CounterMetricFamily(
            "ratekeeper_cached_denials", "Denials answered in-process by the denial cache.", labels=["limiter"]
        )
        errors = CounterMetricFamily("ratekeeper_store_errors", "Checks whose store failed.", labels=["limiter"])
        peaks = GaugeMetricFamily(
            "ratekeeper_peak_used", "Most units seen in use in a window by any key.", labels=["limiter", "window"]
        )
        for name, limiter in self._limiters().items():
            stats = limiter.stats
            for outcome in OUTCOMES:
                checks.add_metric([name, outcome], stats[outcome])
            cached.add_metric([name], stats["cached_denials"])
            errors.add_metric([name], stats["errors"])
            for window, used in stats["peak_used"].items():
                peaks.add_metric([name, f"{window:g}s"], used)
        yield checks
        yield cached
        yield errors
        yield peaks
