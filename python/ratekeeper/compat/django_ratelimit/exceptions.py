"""``Ratelimited``: what a blocking ``@ratelimit`` raises (a
``PermissionDenied``: Django answers 403 unless ``RATELIMIT_VIEW`` and the
middleware say otherwise)."""

from ratekeeper.django.exceptions import Ratelimited as _Ratelimited


class Ratelimited(_Ratelimited):
    """A request over its rate; ``decision`` is ratekeeper's (None when the rate is 0)."""
