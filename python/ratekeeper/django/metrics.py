"""Prometheus metrics for the Django app: every limiter settings.RATEKEEPER
and the @ratelimit decorators made, by rule text.

    # e.g. in your AppConfig.ready()
    from prometheus_client import REGISTRY
    from ratekeeper.django.metrics import collector
    REGISTRY.register(collector())
"""

from ratekeeper.django.conf import get_config
from ratekeeper.metrics import RateKeeperCollector


def collector() -> RateKeeperCollector:
    """A collector reading the current configuration's limiters at each scrape."""
    return RateKeeperCollector(lambda: get_config().limiters())
