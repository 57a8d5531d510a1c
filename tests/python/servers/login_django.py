"""A Django app of one login form, for gunicorn: "5 failed logins per 5
minutes per e-mail address" (count="failures"), by the settings' VIEWS at
/login and by @ratelimit at /signin; a login with the password "right" is
200, any other 401. RATEKEEPER_STORE and _PREFIX from the environment."""

import os

from django.conf import settings

settings.configure(
    SECRET_KEY="test-only",
    DEBUG=False,
    ALLOWED_HOSTS=["*"],
    ROOT_URLCONF=__name__,
    INSTALLED_APPS=["ratekeeper.django"],
    MIDDLEWARE=["ratekeeper.django.middleware.RateLimitMiddleware"],
    RATEKEEPER={
        "STORE": os.environ["RATEKEEPER_STORE"],
        "PREFIX": os.environ["RATEKEEPER_PREFIX"],
        "VIEWS": {"login": {"rules": "5/5min", "key": "post:email", "methods": ["POST"], "count": "failures"}},
        "EXEMPT_PATHS": ["/health"],
    },
)

import django  # noqa: E402

django.setup()

from django.http import HttpResponse  # noqa: E402
from django.urls import path  # noqa: E402
from django.views.decorators.csrf import csrf_exempt  # noqa: E402

from ratekeeper.django import ratelimit  # noqa: E402


def answer(request):
    return HttpResponse("welcome" if request.POST.get("password") == "right" else "no", status=200
                        if request.POST.get("password") == "right" else 401)


login = csrf_exempt(answer)
signin = csrf_exempt(ratelimit("5/5min", key="post:email", method="POST", count="failures")(answer))

urlpatterns = [
    path("login", login, name="login"),
    path("signin", signin),
    path("health", lambda request: HttpResponse("ok")),
]

from django.core.wsgi import get_wsgi_application  # noqa: E402

app = get_wsgi_application()
