"""Front doors with the API of the rate limiters apps already use, on
ratekeeper's core: change the import, keep the configuration.

``ratekeeper.compat.django_ratelimit`` is django-ratelimit's API (the
decorator, ``is_ratelimited``, ``get_usage``, ``Ratelimited``, the
middleware and the ``RATELIMIT_*`` settings).
"""
