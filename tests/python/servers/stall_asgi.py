"""The example Django project under uvicorn, its event loop watched (see
loop_watch): GET /_stall answers the longest stall; everything else goes to
Django, whose ratekeeper middleware runs on every request."""

from django.core.asgi import get_asgi_application

from loop_watch import watched

app = watched(get_asgi_application())
