"""``ratekeeper.django.middleware.RateLimitMiddleware``: limits every request
by the policy settings.RATEKEEPER gives it, sync or async."""

from typing import Any, Awaitable, Callable, Optional, Tuple, Union

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponseBase

from ratekeeper._ratekeeper import ConfigurationError, Decision
from ratekeeper.django.conf import get_config
from ratekeeper.django.limiting import add_headers, check, deny, screen

GetResponse = Callable[[HttpRequest], Union[HttpResponseBase, Awaitable[HttpResponseBase]]]


class RateLimitMiddleware:
    """Place it after AuthenticationMiddleware when a key uses the user."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: GetResponse) -> None:
        # Bad settings stop the app from loading (a gunicorn worker does not
        # boot, with the message), rather than answer 500 to every request.
        try:
            get_config()
        except (ConfigurationError, TypeError, ValueError) as exc:
            raise ImproperlyConfigured(f"settings.RATEKEEPER is invalid: {exc}") from None
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def decide(self, request: HttpRequest) -> Tuple[Optional[Decision], Optional[HttpResponseBase]]:
        """The decision for the request, and the denial response if it is denied."""
        config = get_config()
        if not config.enabled or config.is_exempt(request.path_info):
            return None, None
        ended = screen(request, config)
        if ended is not None:
            return None, ended
        policy = config.policy_for(request)
        if policy is None:
            return None, None
        decision = check(request, policy)
        if decision is None or decision.allowed:
            return decision, None
        return decision, deny(request, decision, config)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self.__acall__(request)
        decision, denial = self.decide(request)
        if denial is not None:
            return denial
        return add_headers(self.get_response(request), decision)  # type: ignore[arg-type]

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        # Key functions may touch request.user (a database query): run the
        # decision in Django's sync thread, as any sync code under ASGI.
        decision, denial = await sync_to_async(self.decide)(request)
        if denial is not None:
            return denial
        response = await self.get_response(request)  # type: ignore[misc]
        return add_headers(response, decision)
