"""``ratekeeper.django.middleware.RateLimitMiddleware``: the core's gate at
the Django door, sync or async. settings.RATEKEEPER (or its POLICY_FILE)
says the policy; the gate decides every request."""

from typing import Any, Awaitable, Callable, Optional, Tuple, Union

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponseBase

from ratekeeper._ratekeeper import ConfigurationError, Verdict
from ratekeeper.django.conf import get_config
from ratekeeper.django.limiting import aconclude, adecide, arespond, conclude, decide, respond

GetResponse = Callable[[HttpRequest], Union[HttpResponseBase, Awaitable[HttpResponseBase]]]
Outcome = Tuple[Optional[Verdict], Optional[HttpResponseBase]]


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

    def decide(self, request: HttpRequest) -> Outcome:
        """The verdict on the request, and the response that ends it if any."""
        config = get_config()
        assert config.gate is not None
        verdict = decide(config.gate, request)
        return verdict, conclude(request, config, verdict)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self.__acall__(request)
        verdict, ended = self.decide(request)
        if ended is not None:
            return ended
        return respond(verdict, lambda: self.get_response(request))  # type: ignore[arg-type,return-value]

    async def adecide(self, request: HttpRequest) -> Outcome:
        """``decide``, awaited on the event loop."""
        config = get_config()
        assert config.gate is not None
        verdict = await adecide(config.gate, request, config)
        return verdict, await aconclude(request, config, verdict)

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        verdict, ended = await self.adecide(request)
        if ended is not None:
            return ended
        return await arespond(verdict, lambda: self.get_response(request))  # type: ignore[arg-type,return-value]
