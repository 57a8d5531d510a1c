"""ratekeeper: exact multi-rule rate limiting over a sliding log.

    >>> import ratekeeper
    >>> limiter = ratekeeper.Limiter("2/second; 5/minute")
    >>> limiter.check("user:42", now=1000.0).allowed
    True

Every decision is made by the Rust core (``ratekeeper._ratekeeper``); this
package adds the WSGI middleware (``ratekeeper.wsgi``) and the Django app
(``ratekeeper.django``).
"""

from ratekeeper._ratekeeper import (
    Admin,
    ConfigurationError,
    Decision,
    Limiter,
    RateKeeperError,
    Rule,
    RuleState,
    StorageError,
    TrustedProxies,
    __version__,
    check_all,
    identity,
)

__all__ = [
    "Admin",
    "ConfigurationError",
    "Decision",
    "Limiter",
    "RateKeeperError",
    "Rule",
    "RuleState",
    "StorageError",
    "TrustedProxies",
    "__version__",
    "check_all",
    "identity",
]
