"""Django integration: add ``"ratekeeper.django"`` to INSTALLED_APPS and
``"ratekeeper.django.middleware.RateLimitMiddleware"`` to MIDDLEWARE, configure
``settings.RATEKEEPER``, and limit single views with ``@ratelimit``;
``penalize(request, name)`` counts a fail2ban strike the app detects (a failed login).
"""

from ratekeeper.django.decorators import ALL, UNSAFE, ratelimit
from ratekeeper.django.exceptions import Ratelimited
from ratekeeper.django.limiting import penalize

__all__ = ["ALL", "UNSAFE", "Ratelimited", "penalize", "ratelimit"]
