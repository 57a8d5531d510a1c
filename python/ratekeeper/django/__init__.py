"""Django integration: add ``"ratekeeper.django"`` to INSTALLED_APPS and
``"ratekeeper.django.middleware.RateLimitMiddleware"`` to MIDDLEWARE, configure
``settings.RATEKEEPER``, and limit single views with ``@ratelimit``.
"""

from ratekeeper.django.decorators import ALL, UNSAFE, ratelimit
from ratekeeper.django.exceptions import Ratelimited

__all__ = ["ALL", "UNSAFE", "Ratelimited", "ratelimit"]
