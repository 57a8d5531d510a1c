"""The exception raised instead of a 429 response when RAISE is set."""

from typing import Optional

from django.core.exceptions import PermissionDenied

from ratekeeper._ratekeeper import Decision


class Ratelimited(PermissionDenied):
    """A request was denied by a rate limit; ``decision`` says why and for how long."""

    def __init__(self, decision: Optional[Decision] = None) -> None:
        super().__init__("rate limited")
        self.decision = decision
