"""Django signals: `rate_limited` is sent for every denied request, with
`request`, `decision` and `scope` (the policy: "default", "path:/api/",
"view:...", "tier:..."), by the middleware and the decorator."""

from django.dispatch import Signal

rate_limited = Signal()
