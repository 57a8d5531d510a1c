"""``@ratelimit``: limit one view, sync or async.

    @ratelimit("5/5min", key="post:email", method="POST")
    def login(request): ...

``key`` is a key spec (see ratekeeper.django.keys); ``method`` limits only
these methods (``ALL`` by default, ``UNSAFE`` for POST/PUT/PATCH/DELETE);
``block=False`` lets denied requests through with ``request.limited = True``;
``group`` names the quota (by default the view's dotted path), so several
views can share one.
"""

import functools
from typing import Any, Callable, Optional, Sequence, TypeVar, Union

from asgiref.sync import iscoroutinefunction
from django.http import HttpRequest

from ratekeeper._ratekeeper import ConfigurationError, parse_rules
from ratekeeper.django.conf import Config, Policy, get_config
from ratekeeper.django.keys import key_function
from ratekeeper.django.limiting import acheck, add_headers, adeny, check, deny

ALL = None
UNSAFE = ("POST", "PUT", "PATCH", "DELETE")

View = TypeVar("View", bound=Callable[..., Any])


def ratelimit(
    rules: Any,
    key: Any = "ip",
    method: Optional[Union[str, Sequence[str]]] = ALL,
    block: bool = True,
    group: Optional[str] = None,
) -> Callable[[View], View]:
    """Limits the decorated view by ``rules`` per ``key``."""
    parse_rules(rules)  # a bad rule fails at import time, naming the text
    if isinstance(method, str):
        method = (method,)
    methods = None if method is None else frozenset(m.upper() for m in method)

    def decorator(view: View) -> View:
        scope = f"view:{group or view.__module__ + '.' + view.__qualname__}"

        built: list = [None, None]  # the config the policy was built for, the policy

        def policy(config: Config) -> Policy:
            if built[0] is not config:
                try:
                    limiter = config.limiter(rules, scope)
                except TypeError as exc:
                    raise ConfigurationError(f"@ratelimit on {scope}: {exc}") from None
                built[:] = [config, Policy(scope, limiter, key_function(key, config.proxies), methods)]
            return built[1]  # type: ignore[no-any-return]

        def decide(request: HttpRequest) -> Any:
            config = get_config()
            chosen = policy(config)
            if not config.enabled or not chosen.applies_to(request):
                return None, None
            decision = check(request, chosen)
            if decision is None or decision.allowed or not block:
                return decision, None
            return decision, deny(request, decision, config)

        async def adecide(request: HttpRequest) -> Any:
            config = get_config()
            chosen = policy(config)
            if not config.enabled or not chosen.applies_to(request):
                return None, None
            decision = await acheck(request, chosen)
            if decision is None or decision.allowed or not block:
                return decision, None
            return decision, await adeny(request, decision, config)

        if iscoroutinefunction(view):

            @functools.wraps(view)
            async def async_wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
                decision, denial = await adecide(request)
                if denial is not None:
                    return denial
                return add_headers(await view(request, *args, **kwargs), decision)

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
            decision, denial = decide(request)
            if denial is not None:
                return denial
            return add_headers(view(request, *args, **kwargs), decision)

        return wrapper  # type: ignore[return-value]

    return decorator
