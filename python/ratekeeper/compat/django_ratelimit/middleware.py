"""``RatelimitMiddleware``: renders ``Ratelimited`` with the view
``settings.RATELIMIT_VIEW`` names (``view(request, exception)``)."""

from typing import Any, Callable, Optional

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse
from django.utils.module_loading import import_string

from ratekeeper.compat.django_ratelimit.exceptions import Ratelimited


class RatelimitMiddleware:
    """Answers a ``Ratelimited`` raised by a view with ``RATELIMIT_VIEW``."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> Optional[Any]:
        """``RATELIMIT_VIEW(request, exception)`` for a ``Ratelimited``; None (Django's own handling) for others."""
        if not isinstance(exception, Ratelimited):
            return None
        name = getattr(settings, "RATELIMIT_VIEW", None)
        if not name:
            raise ImproperlyConfigured("RatelimitMiddleware needs RATELIMIT_VIEW, the dotted path of a view(request, exception)")
        return import_string(name)(request, exception)
