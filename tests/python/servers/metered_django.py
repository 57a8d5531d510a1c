"""A Django app of one metered API view, for gunicorn: POST /v1/chat
answers 200 with the tokens the call "used" (its query's `used`) in the
`X-Tokens-Used` header, limited by the policy file METERED_POLICY names
(RATEKEEPER["POLICY_FILE"]: a throttle with meters, settled by that
header)."""

import os

from django.conf import settings

settings.configure(
    SECRET_KEY="test-only",
    DEBUG=False,
    ALLOWED_HOSTS=["*"],
    ROOT_URLCONF=__name__,
    INSTALLED_APPS=["ratekeeper.django"],
    MIDDLEWARE=["ratekeeper.django.middleware.RateLimitMiddleware"],
    RATEKEEPER={"POLICY_FILE": os.environ["METERED_POLICY"]},
)

import django  # noqa: E402

django.setup()

from django.http import HttpResponse  # noqa: E402
from django.urls import path  # noqa: E402
from django.views.decorators.csrf import csrf_exempt  # noqa: E402


@csrf_exempt
def chat(request):
    response = HttpResponse("answer")
    response["X-Tokens-Used"] = request.GET.get("used", "0")
    return response


urlpatterns = [
    path("v1/chat", chat),
    path("health", lambda request: HttpResponse("ok")),
]

from django.core.wsgi import get_wsgi_application  # noqa: E402

app = get_wsgi_application()
