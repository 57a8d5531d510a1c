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
    CONSOLE_CSP,
    CONSOLE_STYLE,
    DEFAULTS,
    Admin,
    Answer,
    ConfigurationError,
    Decision,
    Fail2Ban,
    Gate,
    Limiter,
    RateKeeperError,
    RateLimitExceeded,
    Lease,
    Reservation,
    Responses,
    Rule,
    RuleState,
    StorageError,
    TrustedProxies,
    Verdict,
    __version__,
    acheck_all,
    check_all,
    check_option,
    flush_denials,
    identity,
    parse_rules,
    scope_name,
)
from ratekeeper import _exit

__all__ = [
    "CONSOLE_CSP",
    "CONSOLE_STYLE",
    "DEFAULTS",
    "Admin",
    "Answer",
    "ConfigurationError",
    "Decision",
    "Fail2Ban",
    "Gate",
    "Limiter",
    "RateKeeperError",
    "RateLimitExceeded",
    "Lease",
    "Reservation",
    "Responses",
    "Rule",
    "RuleState",
    "StorageError",
    "TrustedProxies",
    "Verdict",
    "__version__",
    "acheck_all",
    "check_all",
    "check_option",
    "flush_denials",
    "identity",
    "parse_rules",
    "scope_name",
]
