"""django-ratelimit's API on ratekeeper: replace ``django_ratelimit`` by
``ratekeeper.compat.django_ratelimit`` in the imports and keep the
decorators, the calls and the ``RATELIMIT_*`` settings. Each check is an
exact sliding window on ratekeeper's store (the Redis of
``RATELIMIT_USE_CACHE``, or the process's memory), shared by (group, key)
with every other ratekeeper door. The docs' "Swapping in" (docs/migrating.md) lists what behaves
differently on purpose.
"""

ALL = None
UNSAFE = ("DELETE", "PATCH", "POST", "PUT")
