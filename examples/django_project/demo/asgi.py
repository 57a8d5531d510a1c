"""The example project under ASGI: `uvicorn --app-dir examples/django_project demo.asgi:application`.
The ratekeeper middleware awaits its checks on the event loop."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demo.settings")
application = get_asgi_application()
