"""``@ratelimit``: django-ratelimit's decorator on ratekeeper.

    @ratelimit(key="ip", rate="5/m")
    def login(request): ...

Each call checks (and counts) the request with ``is_ratelimited``; a limited
request gets ``request.limited = True`` and, with ``block=True`` (the
default), raises ``Ratelimited`` (or ``RATELIMIT_EXCEPTION_CLASS``). Async
views are awaited, the check off the event loop. Class-based views take it
through ``django.utils.decorators.method_decorator``.
"""

import functools
from typing import Any, Callable, Optional, Sequence, TypeVar, Union

from asgiref.sync import iscoroutinefunction, sync_to_async
from django.conf import settings
from django.http import HttpRequest
from django.utils.module_loading import import_string

from ratekeeper.compat.django_ratelimit import ALL, UNSAFE
from ratekeeper.compat.django_ratelimit.core import is_ratelimited
from ratekeeper.compat.django_ratelimit.exceptions import Ratelimited

__all__ = ["ratelimit"]

View = TypeVar("View", bound=Callable[..., Any])


def _limited(request: HttpRequest, limited: bool, block: bool) -> None:
    request.limited = getattr(request, "limited", False) or limited  # type: ignore[attr-defined]
    if limited and block:
        cls = getattr(settings, "RATELIMIT_EXCEPTION_CLASS", Ratelimited)
        raise (import_string(cls) if isinstance(cls, str) else cls)()


def ratelimit(
    group: Optional[str] = None,
    key: Any = None,
    rate: Any = None,
    method: Optional[Union[str, Sequence[str]]] = ALL,
    block: bool = True,
) -> Callable[[View], View]:
    """Limits the decorated view by ``rate`` per ``key`` within ``group``
    (by default the view's dotted name); see ``is_ratelimited``."""

    def decorator(fn: View) -> View:
        if iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
                limited = await sync_to_async(is_ratelimited)(request, group=group, fn=fn, key=key, rate=rate,
                                                              method=method, increment=True)
                _limited(request, limited, block)
                return await fn(request, *args, **kwargs)

            return async_wrapped  # type: ignore[return-value]

        @functools.wraps(fn)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
            limited = is_ratelimited(request, group=group, fn=fn, key=key, rate=rate, method=method, increment=True)
            _limited(request, limited, block)
            return fn(request, *args, **kwargs)

        return wrapped  # type: ignore[return-value]

    return decorator


ratelimit.ALL = ALL  # type: ignore[attr-defined]
ratelimit.UNSAFE = UNSAFE  # type: ignore[attr-defined]
