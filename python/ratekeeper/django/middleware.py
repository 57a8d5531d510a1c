"""``ratekeeper.django.middleware.RateLimitMiddleware``: limits every request
by the policy settings.RATEKEEPER gives it, sync or async."""

from typing import Any, Awaitable, Callable, Optional, Tuple, Union

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponseBase

from ratekeeper._ratekeeper import ConfigurationError, Decision
from ratekeeper.django.conf import get_config
from ratekeeper.django.limiting import acheck, add_headers, adeny, ascreen, check, deny, screen

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

    async def adecide(self, request: HttpRequest) -> Tuple[Optional[Decision], Optional[HttpResponseBase]]:
        """``decide``, awaited on the event loop: the check is awaited, the
        user read with ``request.auser()``; only the application's own key
        function, tier or responder runs in a thread."""
        config = get_config()
        if not config.enabled or config.is_exempt(request.path_info):
            return None, None
        ended = await ascreen(request, config)
        if ended is not None:
            return None, ended
        policy = config.policy_for(request)
        if policy is None:
            return None, None
        decision = await acheck(request, policy)
        if decision is None or decision.allowed:
            return decision, None
        return decision, await adeny(request, decision, config)

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        decision, denial = await self.adecide(request)
        if denial is not None:
            return denial
        response = await self.get_response(request)  # type: ignore[misc]
        return add_headers(response, decision)
