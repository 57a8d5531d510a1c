"""What the Python doors share besides the core: the policy their keyword
arguments describe, and the logging of a verdict. What they answer
(statuses, headers, bodies, the denial log line) is the core's gate
(``ratekeeper.Gate``) and ``ratekeeper.Responses``.
"""

import asyncio
import logging
from typing import Any, Callable, Dict, Iterable, Optional, Sequence, Set, Union

from ratekeeper._ratekeeper import Decision, Gate, Limiter, RateKeeperError, Responses, Verdict

DENIALS = logging.getLogger("ratekeeper.denials")

# The keyword arguments a door takes that the policy says instead when one is given.
POLICY_ARGUMENTS = ("key", "exempt", "trusted_proxies", "ipv4_prefix", "ipv6_prefix", "status",
                    "blocked_status", "headers", "log_keys")


def _level(level: Optional[Union[int, str]]) -> Optional[int]:
    """The logging level `level` names, when denials are logged at it."""
    if level is None:
        return None
    number = logging.getLevelName(level.upper()) if isinstance(level, str) else level
    if not isinstance(number, int) or not DENIALS.isEnabledFor(number):
        return None
    return number


def log_denial(
    level: Optional[Union[int, str]],
    responses: Responses,
    scope: str,
    key: Union[str, bytes],
    decision: Decision,
    method: str = "",
    path: str = "",
) -> None:
    """The core's one line per denial on the `ratekeeper.denials` logger (with
    its fields in ``extra["ratekeeper"]`` for structured handlers); nothing
    when `level` is None."""
    number = _level(level)
    if number is None:
        return
    text, fields = responses.denial_log(decision, scope, key, method, path)
    DENIALS.log(number, "%s", text, extra={"ratekeeper": fields})


def log_verdict(level: Optional[Union[int, str]], verdict: Verdict) -> None:
    """A denial's line, as the gate wrote it, on the `ratekeeper.denials`
    logger (and the line of what a throttle in shadow mode let through,
    which ends ``shadow=true``); nothing when the verdict has none."""
    line = verdict.log
    number = _level(level) if line is not None else None
    if line is not None and number is not None:
        DENIALS.log(number, "%s", line[0], extra={"ratekeeper": line[1]})


def door_gate(
    door: str,
    limiter: Optional[Limiter],
    policy: Any,
    given: Dict[str, Any],
    key_default: Optional[Callable[..., Any]] = None,
) -> Gate:
    """The gate of a door: from `policy` (a policy file's path or a dict, on
    `limiter`'s store when one is given), or else the one throttle its
    keyword arguments describe (`given`: key, exempt, trusted_proxies,
    ipv4_prefix, ipv6_prefix, status, blocked_status, headers, log_keys) on
    `limiter`, keyed by the client unless `key` is given."""
    if policy is not None:
        named = sorted(name for name in POLICY_ARGUMENTS if given.get(name) not in (None, (), [], False))
        if named:
            raise TypeError(f"{door}: {', '.join(named)} come from the policy when policy= is given")
        if limiter is not None and not isinstance(limiter, Limiter):
            raise TypeError(f"limiter must be a ratekeeper.Limiter, not {type(limiter).__name__}")
        return Gate(policy, limiter=limiter)
    if not isinstance(limiter, Limiter):
        raise TypeError(f"limiter must be a ratekeeper.Limiter, not {type(limiter).__name__}")
    exempt = given.get("exempt") or ()
    if isinstance(exempt, str):
        exempt = (exempt,)
    spec: Dict[str, Any] = {
        "trusted_proxies": list(given.get("trusted_proxies") or ()),
        "ipv4_prefix": given.get("ipv4_prefix"),
        "ipv6_prefix": given.get("ipv6_prefix"),
        "status": given.get("status"),
        "blocked_status": given.get("blocked_status"),
        "headers": given.get("headers"),
        "log_keys": bool(given.get("log_keys")),
        "throttle": [{"key": given.get("key") or key_default or "ip"}],
    }
    if callable(exempt):
        spec["exempt"] = exempt
    else:
        spec["exempt_paths"] = [str(p) for p in exempt]
    return Gate(spec, limiter=limiter)


def exempt_paths(exempt: Union[Sequence[str], Callable[..., bool]]) -> Sequence[str]:
    """The path prefixes of an `exempt` argument (none for a callable)."""
    if callable(exempt):
        return ()
    return (exempt,) if isinstance(exempt, str) else tuple(exempt)


def tell_end(verdict: Verdict, status: Optional[int], headers: Optional[Iterable[Any]] = None) -> None:
    """Tells the gate that the response to a request it let through ended,
    with its status (None: the application raised) and headers
    (``verdict.finish``: the slots the request held are released, a
    throttle that counts only some responses gives back what this one does
    not count, and a throttle with meters settles them to the response's
    ``usage`` headers); a store that fails to take them back is logged,
    never the response's problem (a slot not given back lapses with its
    lease)."""
    try:
        verdict.finish(status, headers)
    except RateKeeperError as exc:
        logging.getLogger("ratekeeper").warning("ratekeeper: a response's end was not told (%s)", exc)


async def atell_end(verdict: Verdict, status: Optional[int], headers: Optional[Iterable[Any]] = None) -> None:
    """``tell_end``, awaited, and carried through when the request's task is
    cancelled (a client that hung up): the gate is told in a task of its own."""
    telling = asyncio.ensure_future(_atell_end(verdict, status, headers))
    _TELLING.add(telling)
    telling.add_done_callback(_TELLING.discard)
    await asyncio.shield(telling)


# The tellings under way (a task is kept only weakly by its loop).
_TELLING: Set["asyncio.Future[None]"] = set()


async def _atell_end(verdict: Verdict, status: Optional[int], headers: Optional[Iterable[Any]]) -> None:
    try:
        await verdict.afinish(status, headers)
    except RateKeeperError as exc:
        logging.getLogger("ratekeeper").warning("ratekeeper: a response's end was not told (%s)", exc)
