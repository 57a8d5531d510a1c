"""The example Django project (servers/django_wsgi.py) with each answer
carrying X-Took-Ms, the time ratekeeper's middleware took to decide it (a
middleware on each side of it notes when the decision began and ended)."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples", "django_project"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demo.settings")

from django.conf import settings  # noqa: E402

RATEKEEPER = "ratekeeper.django.middleware.RateLimitMiddleware"


class Before:
    """Notes when the decision began, and puts what it took on the answer."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request.decision_began = time.monotonic()
        response = self.get_response(request)
        ended = getattr(request, "decision_ended", time.monotonic())  # (a denial never reaches After)
        response["X-Took-Ms"] = f"{(ended - request.decision_began) * 1000:.1f}"
        return response


class After:
    """Notes when the decision ended (the request was let through)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request.decision_ended = time.monotonic()
        return self.get_response(request)


at = settings.MIDDLEWARE.index(RATEKEEPER)
settings.MIDDLEWARE = [*settings.MIDDLEWARE[:at], f"{__name__}.Before", RATEKEEPER, f"{__name__}.After",
                       *settings.MIDDLEWARE[at + 1:]]

from django.core.wsgi import get_wsgi_application  # noqa: E402

app = get_wsgi_application()
