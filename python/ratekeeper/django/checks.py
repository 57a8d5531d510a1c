"""Django system checks: a bad settings.RATEKEEPER stops start-up with a clear message."""

from typing import Any, List

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register

from ratekeeper._ratekeeper import ConfigurationError
from ratekeeper.django.conf import CHECK_IDS, SettingError, build

MIDDLEWARE = "ratekeeper.django.middleware.RateLimitMiddleware"


@register()
def check_settings(app_configs: Any = None, **kwargs: Any) -> List[CheckMessage]:
    """E001-E006: a bad value in settings.RATEKEEPER, one id per kind (see
    ``conf.CHECK_IDS``), the message naming the setting. W001: rules are set
    but the middleware is not installed. Builds the limiters, calls no store."""
    raw = getattr(settings, "RATEKEEPER", None)
    try:
        build(raw)
    except (ConfigurationError, TypeError, ValueError) as exc:
        check_id = exc.check_id if isinstance(exc, SettingError) else CHECK_IDS["settings"]
        return [
            Error(
                f"settings.RATEKEEPER is invalid: {exc}",
                hint="See docs/python.md (Django) for every setting and its form.",
                id=check_id,
            )
        ]
    if isinstance(raw, dict) and (raw.get("RULES") or raw.get("PATHS") or raw.get("VIEWS") or raw.get("TIERS")):
        if MIDDLEWARE not in getattr(settings, "MIDDLEWARE", []):
            return [
                Warning(
                    "settings.RATEKEEPER sets rules but its middleware is not installed, so they limit nothing.",
                    hint=f"Add '{MIDDLEWARE}' to MIDDLEWARE (after AuthenticationMiddleware to key by user).",
                    id="ratekeeper.W001",
                )
            ]
    return []
