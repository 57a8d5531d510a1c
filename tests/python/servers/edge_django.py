"""A Django app for the edge tests, as WSGI for gunicorn. EDGE_DOOR picks
its part: "direct" limits /api/ per X-Api-Key under the scope "api"
(EDGE_RULES) with the middleware; "proxied" limits nothing itself (it sits
behind a proxy that asks ratekeeper-server); "policy" applies the policy
file EDGE_POLICY (POLICY_FILE); "django-ratelimit" limits /api/ per
X-Api-Key in the group "api" at EDGE_RULES (django-ratelimit's rate) with
ratekeeper.compat.django_ratelimit, its Redis cache the store (a denial:
RATELIMIT_VIEW's 429). RATEKEEPER_STORE and RATEKEEPER_PREFIX name the
store. Every answer says which door served it."""

import os

from django.conf import settings

DOOR = os.environ.get("EDGE_DOOR", "direct")
COMPAT = {
    "MIDDLEWARE": ["ratekeeper.compat.django_ratelimit.middleware.RatelimitMiddleware"],
    "CACHES": {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                           "LOCATION": os.environ.get("RATEKEEPER_STORE", "")}},
    "RATELIMIT_CACHE_PREFIX": os.environ.get("RATEKEEPER_PREFIX"),
    "RATELIMIT_VIEW": f"{__name__}.too_many",
} if DOOR == "django-ratelimit" else {}
settings.configure(**{**dict(
    DEBUG=False,
    SECRET_KEY="edge-tests-only",
    ALLOWED_HOSTS=["*"],
    ROOT_URLCONF=__name__,
    INSTALLED_APPS=["ratekeeper.django"],
    MIDDLEWARE=["ratekeeper.django.middleware.RateLimitMiddleware"],
    RATEKEEPER={"POLICY_FILE": os.environ["EDGE_POLICY"]} if DOOR == "policy" else {
        "STORE": os.environ["RATEKEEPER_STORE"],
        "PREFIX": os.environ["RATEKEEPER_PREFIX"],
        "ENABLED": DOOR == "direct",
        "PATHS": [{"path": "/api/", "rules": os.environ.get("EDGE_RULES", "5/minute"),
                   "key": "header:X-Api-Key", "scope": "api"}],
    },
), **COMPAT})

from django.core.wsgi import get_wsgi_application  # noqa: E402
from django.http import HttpResponse  # noqa: E402
from django.urls import re_path  # noqa: E402

from ratekeeper.compat.django_ratelimit.decorators import ratelimit  # noqa: E402


def served(request):
    """Says which app and door served the request."""
    return HttpResponse(f"django {DOOR} {request.path}", content_type="text/plain")


def too_many(request, exception):
    """RATELIMIT_VIEW: a limited request's answer."""
    return HttpResponse("django django-ratelimit limited", status=429, content_type="text/plain")


urlpatterns = [re_path(r"^.*$", served)]
if DOOR == "django-ratelimit":
    limited = ratelimit(group="api", key="header:x-api-key", rate=os.environ.get("EDGE_RULES", "5/m"))(served)
    urlpatterns = [re_path(r"^api/", limited), *urlpatterns]
app = get_wsgi_application()
