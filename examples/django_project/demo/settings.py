"""Settings of the example project. RATEKEEPER_STORE picks the store
(default: the embedded memory store; e.g. redis://127.0.0.1:6379/0)."""

import os

SECRET_KEY = "example-only-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "demo.urls"
USE_TZ = True

INSTALLED_APPS = [
    # the admin site logs staff in for the safelist/blocklist page (/ratekeeper/)
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "ratekeeper.django",
]

MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "ratekeeper.django.middleware.RateLimitMiddleware",
]

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

STATIC_URL = "static/"

DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}

RATEKEEPER = {
    "STORE": os.environ.get("RATEKEEPER_STORE", "memory://"),
    "PREFIX": os.environ.get("RATEKEEPER_PREFIX", "demo"),
    # every request, per client IP
    "RULES": "5/second; 20/minute",
    "KEY": "user_or_ip",
    # the API is limited per API key, more tightly for writes
    "PATHS": [
        {"path": "/api/", "rules": "3/minute", "key": "header:X-Api-Key", "methods": ["POST"]},
    ],
    "EXEMPT_PATHS": ["/health"],
    # the load balancer in front of the app
    "TRUSTED_PROXIES": ["127.0.0.1", "10.0.0.0/8"],
    # which rate-limit headers responses carry: "all", "draft", "legacy" or "none"
    "HEADERS": os.environ.get("RATEKEEPER_HEADERS", "all"),
}
