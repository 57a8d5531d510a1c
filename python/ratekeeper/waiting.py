"""``@limiter.limited(key=..., cost=1, wait=True, timeout=None)``: a function
(sync or async) that runs only within the limiter's rules, for scripts and
jobs that call someone else's API:

    partner = ratekeeper.Limiter("10/second; 1000/day", "redis://127.0.0.1:6379/0", scope="partner-api")

    @partner.limited("partner-api")
    def fetch(item_id): ...

    @partner.limited(lambda account, **kw: f"account:{account}", wait=False)
    async def sync_account(account): ...

With ``wait=True`` a call waits for its slot (``acquire`` / ``aacquire``,
at most ``timeout`` seconds); with ``wait=False`` a denied call raises
``RateLimitExceeded`` at once. Either raises it when the cost can never pass.

When a call's cost is known only from its result (the tokens an LLM call
used), ``cost`` is an estimate and ``settle`` a callable of the result giving
what the call cost (an int, or units per meter): the estimate is reserved
before the call (``reserve``, waiting as above) and settled after it. A call
that raises keeps its estimate.

    llm = ratekeeper.Limiter({"requests": "3500/minute", "tokens": "90000/minute"}, "redis://...")

    @llm.limited("openai", cost={"requests": 1, "tokens": 2000},
                 settle=lambda reply: {"tokens": reply.usage.total_tokens})
    def complete(prompt): ...

A limiter with an in-flight rule (``"5 concurrent; 100/minute"``) holds a
slot for each call's whole run (``hold`` / ``ahold``, waiting as above),
released when the call returns or raises.
"""

import functools
import inspect
from typing import Any, Callable, Mapping, Optional, TypeVar, Union

from ratekeeper._ratekeeper import Limiter

F = TypeVar("F", bound=Callable[..., Any])


def limited(limiter: Limiter, key: Any, cost: Union[int, Mapping[str, int], None] = None, wait: bool = True,
            timeout: Optional[float] = None, settle: Optional[Callable[[Any], Any]] = None) -> Callable[[F], F]:
    """The decorator ``Limiter.limited`` returns (see the module's docstring)."""

    def key_of(args: tuple, kwargs: dict) -> Any:
        return key(*args, **kwargs) if callable(key) else key

    def decorate(func: F) -> F:
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                if limiter.in_flight is not None and settle is None:
                    async with limiter.ahold(key_of(args, kwargs), cost, wait=wait, timeout=timeout):
                        return await func(*args, **kwargs)
                if settle is None:
                    await limiter.aacquire(key_of(args, kwargs), cost, timeout if wait else 0)
                    return await func(*args, **kwargs)
                reservation = await limiter.areserve(key_of(args, kwargs), cost, wait=wait, timeout=timeout)
                async with reservation:
                    result = await func(*args, **kwargs)
                    await reservation.asettle(settle(result))
                    return result

            return run_async  # type: ignore[return-value]

        @functools.wraps(func)
        def run(*args: Any, **kwargs: Any) -> Any:
            if limiter.in_flight is not None and settle is None:
                with limiter.hold(key_of(args, kwargs), cost, wait=wait, timeout=timeout):
                    return func(*args, **kwargs)
            if settle is None:
                limiter.acquire(key_of(args, kwargs), cost, timeout if wait else 0)  # no wait: a timeout of 0
                return func(*args, **kwargs)
            with limiter.reserve(key_of(args, kwargs), cost, wait=wait, timeout=timeout) as reservation:
                result = func(*args, **kwargs)
                reservation.settle(settle(result))
                return result

        return run  # type: ignore[return-value]

    return decorate
