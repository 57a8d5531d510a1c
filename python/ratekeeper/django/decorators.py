"""``@ratelimit``: limit one view, sync or async.

    @ratelimit("5/5min", key="post:email", method="POST")
    def login(request): ...

``key`` is a key spec (see ratekeeper.django.keys); ``method`` limits only
these methods (``ALL`` by default, ``UNSAFE`` for POST/PUT/PATCH/DELETE);
``block=False`` lets denied requests through with ``request.limited = True``;
``group`` names the quota (by default the view's dotted path), so several
views can share one; ``count`` counts only some responses: ``"failures"``
(a status of 400 or more) or a list of statuses, so that
``@ratelimit("5/5min", key="post:email", method="POST", count="failures")``
stops the sixth failed login of an e-mail address and lets every good one
through (a request is counted before the view runs, and given back when its
response is not one counted).
"""

import functools
from typing import Any, Callable, List, Optional, Sequence, TypeVar, Union

from asgiref.sync import iscoroutinefunction
from django.http import HttpRequest

from ratekeeper._ratekeeper import ConfigurationError, Gate, parse_rules
from ratekeeper.django.conf import Config, get_config
from ratekeeper.django.limiting import aconclude, adecide, arespond, conclude, decide, respond

ALL = None
UNSAFE = ("POST", "PUT", "PATCH", "DELETE")

View = TypeVar("View", bound=Callable[..., Any])


def ratelimit(
    rules: Any,
    key: Any = "ip",
    method: Optional[Union[str, Sequence[str]]] = ALL,
    block: bool = True,
    group: Optional[str] = None,
    count: Any = None,
) -> Callable[[View], View]:
    """Limits the decorated view by ``rules`` per ``key``."""
    parse_rules(rules)  # a bad rule fails at import time, naming the text
    if isinstance(method, str):
        method = (method,)
    methods = None if method is None else frozenset(m.upper() for m in method)

    def decorator(view: View) -> View:
        scope = f"view:{group or view.__module__ + '.' + view.__qualname__}"

        built: List[Any] = [None, None]  # the config the gate was built for, the gate

        def gate(config: Config) -> Gate:
            if built[0] is not config:
                try:
                    built[:] = [config, config.view_gate(scope, rules, key, methods, count)]
                except (TypeError, ConfigurationError) as exc:
                    raise ConfigurationError(f"@ratelimit on {scope}: {exc}") from None
            return built[1]  # type: ignore[no-any-return]

        if iscoroutinefunction(view):

            @functools.wraps(view)
            async def async_wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
                config = get_config()
                if not config.enabled:
                    return await view(request, *args, **kwargs)
                verdict = await adecide(gate(config), request, config)
                ended = await aconclude(request, config, verdict, block)
                if ended is not None:
                    return ended
                return await arespond(verdict, lambda: view(request, *args, **kwargs))

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
            config = get_config()
            if not config.enabled:
                return view(request, *args, **kwargs)
            verdict = decide(gate(config), request)
            ended = conclude(request, config, verdict, block)
            if ended is not None:
                return ended
            return respond(verdict, lambda: view(request, *args, **kwargs))

        return wrapper  # type: ignore[return-value]

    return decorator
