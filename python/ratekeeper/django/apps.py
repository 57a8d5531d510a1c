"""The Django app: registers the system checks of settings.RATEKEEPER."""

from django.apps import AppConfig


class RateKeeperConfig(AppConfig):
    """``ratekeeper.django`` in INSTALLED_APPS."""

    name = "ratekeeper.django"
    label = "ratekeeper"
    verbose_name = "ratekeeper"

    def ready(self) -> None:
        from ratekeeper.django import checks  # noqa: F401  (registers the checks)
