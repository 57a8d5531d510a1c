"""The example Django project as a WSGI app for gunicorn (settings from
examples/django_project/demo/settings.py; RATEKEEPER_STORE, _PREFIX and
_HEADERS from the environment)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples", "django_project"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demo.settings")

from django.core.wsgi import get_wsgi_application  # noqa: E402

app = get_wsgi_application()
