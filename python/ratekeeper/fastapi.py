"""Per-route limits for FastAPI, as a dependency:

    import ratekeeper, ratekeeper.fastapi
    from fastapi import Depends, FastAPI

    app = FastAPI()
    ratekeeper.fastapi.setup(app, ratekeeper.Limiter("100/minute", "redis://127.0.0.1:6379/0"))

    @app.get("/search", dependencies=[Depends(ratekeeper.fastapi.limit("5/second; 100/minute"))])
    async def search(q: str): ...

Each route's rules keep their own quota (scope ``route:<path>``, or
``scope=``), on the store of the limiter ``setup`` gave (or ``limiter=``).

A whole policy (the file every door reads) guards the routes of an app or a
router, every throttle that applies counting:

    app = FastAPI(dependencies=[Depends(ratekeeper.fastapi.policy("policy.toml"))])
    ratekeeper.fastapi.setup(app)

An admitted request's response carries the rate-limit headers; a denied one
gets the core's 429 (``Retry-After``, ``{"error":"rate_limited",...}``), a
blocked client the core's 403, both rendered by the handler ``setup``
installs. The decision is ``request.state.ratekeeper``.
"""

import inspect
from functools import partial
from typing import Any, Awaitable, Callable, Dict, Optional, Union

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ratekeeper._ratekeeper import Answer, Decision, Gate, Limiter, Responses, TrustedProxies, parse_rules, scope_name
from ratekeeper.body import field, readable_length, unreadable
from ratekeeper.doors import log_verdict

KeyFunc = Callable[[Request], Union[Optional[Union[str, bytes]], Awaitable[Optional[Union[str, bytes]]]]]


class RateLimited(HTTPException):
    """A denied or blocked request: ``decision`` (None for a ban) and the core's ``answer``."""

    def __init__(self, decision: Optional[Decision], answer: Answer) -> None:
        headers = {n: v for n, v in answer.headers.items() if n not in ("Content-Length", "Content-Type")}
        super().__init__(status_code=answer.status or 429, detail=answer.body.decode(), headers=headers)
        self.decision = decision
        self.answer = answer


async def rate_limited_handler(request: Request, exc: Exception) -> Response:
    """Renders a RateLimited as the core's answer (status, headers, JSON body)."""
    assert isinstance(exc, RateLimited)
    answer = exc.answer
    return Response(answer.body, status_code=answer.status or 429, headers=dict(answer.headers))


class _Setup:
    limiter: Optional[Limiter] = None
    answers: Dict[str, Any] = {}
    proxies: TrustedProxies = TrustedProxies([])


_setup = _Setup()


def setup(
    app: Any,
    limiter: Optional[Limiter] = None,
    *,
    trusted_proxies: Any = (),
    ipv4_prefix: Optional[int] = None,
    ipv6_prefix: Optional[int] = None,
    status: Optional[int] = None,
    blocked_status: Optional[int] = None,
    headers: Optional[str] = None,
) -> None:
    """Installs the handler that renders denials, and the limiter (its store,
    options, trusted proxies and client prefixes: ``ipv4_prefix`` 16-32,
    default 32, ``ipv6_prefix`` 48-128, default 64) ``limit`` routes limit on
    by default (none needed when every route has ``limiter=`` or ``policy``)."""
    _setup.proxies = TrustedProxies(list(trusted_proxies), ipv4_prefix=ipv4_prefix, ipv6_prefix=ipv6_prefix)
    Responses(status=status, blocked_status=blocked_status, headers=headers)  # checked now
    _setup.limiter = limiter
    _setup.answers = {"trusted_proxies": list(trusted_proxies), "ipv4_prefix": ipv4_prefix,
                      "ipv6_prefix": ipv6_prefix, "status": status, "blocked_status": blocked_status,
                      "headers": headers}
    app.add_exception_handler(RateLimited, rate_limited_handler)


def _proxies(request: Request) -> TrustedProxies:
    """The trusted proxies and prefixes of a request: its ``policy``
    dependency's policy's, else those ``setup`` gave."""
    return request.scope.get("ratekeeper.proxies") or _setup.proxies


def client_ip(request: Request) -> str:
    """The client's IP, believing X-Forwarded-For only from the trusted
    proxies of the ``policy`` guarding the request, else those ``setup`` gave."""
    peer = request.client.host if request.client else ""
    return _proxies(request).client_ip(peer, request.headers.get("x-forwarded-for"))


def client_key(request: Request) -> str:
    """The client as the default key names it: its IP's network (an IPv6
    client as its /64), by the trusted proxies and prefixes of the
    ``policy`` guarding the request, else those ``setup`` gave."""
    peer = request.client.host if request.client else ""
    return _proxies(request).client_key(peer, request.headers.get("x-forwarded-for"))


def _given_key(scope: Dict[str, Any]) -> Any:
    """The key the route's own ``key`` gave (awaited before the gate decides)."""
    return scope.get("ratekeeper.key")


def limit(
    rules: Any,
    *,
    key: Optional[KeyFunc] = None,
    cost: int = 1,
    scope: Optional[str] = None,
    limiter: Optional[Limiter] = None,
) -> Callable[[Request, Response], Awaitable[Decision]]:
    """A dependency limiting a route by ``rules`` per ``key(request)`` (a
    function or coroutine function; default: the client, ``client_key``; None: not
    limited). Bad rules fail here, at import."""
    text = rules if isinstance(rules, str) else "; ".join(str(r) for r in parse_rules(rules))
    parse_rules(text)
    made: Dict[Any, Gate] = {}

    async def dependency(request: Request, response: Response) -> Any:
        base = limiter or _setup.limiter
        if base is None:
            raise RuntimeError("ratekeeper.fastapi.limit needs limiter= or ratekeeper.fastapi.setup(app, limiter)")
        route = request.scope.get("route")
        name = scope or f"route:{getattr(route, 'path', request.url.path)}"
        answers = _setup.answers
        gate = made.get((id(base), id(answers), name))  # a later setup() may give another store or answers
        if gate is None:
            throttle = {"scope": scope_name(name), "rules": text, "key": _given_key if key is not None else "ip"}
            gate = made[(id(base), id(answers), name)] = Gate({**answers, "throttle": [throttle]}, limiter=base)
        if key is not None:
            found = key(request)
            request.scope["ratekeeper.key"] = await found if inspect.isawaitable(found) else found
        return await _decide(gate, request, response, cost)

    return dependency


def policy(
    policy: Any,
    *,
    limiter: Optional[Limiter] = None,
    log_level: Optional[Union[int, str]] = "INFO",
) -> Callable[[Request, Response], Awaitable[Optional[Decision]]]:
    """A dependency deciding ``policy`` (a policy file's path or a dict, as
    every door reads it; on ``limiter``'s store when one is given) for the
    routes it guards: an app's (``FastAPI(dependencies=[...])``), a router's
    or a route's. The handler ``setup(app)`` installs renders its denials
    and blocks; a denial is logged at ``log_level`` when the policy logs
    denials. ``client_ip`` and ``client_key`` believe the policy's trusted
    proxies (and prefixes) for the requests it guards. A bad policy fails
    here, at import."""
    if limiter is not None and not isinstance(limiter, Limiter):
        raise TypeError(f"limiter must be a ratekeeper.Limiter, not {type(limiter).__name__}")
    gate = Gate(policy, limiter=limiter)
    gate.check_unanswered()  # a dependency never sees the response a throttle's `count` needs
    proxies = gate.trusted_proxies

    async def dependency(request: Request, response: Response) -> Any:
        request.scope["ratekeeper.proxies"] = proxies  # for client_ip and client_key, the policy's keys' too
        return await _decide(gate, request, response, 1, log_level)

    return dependency


async def _decide(gate: Gate, request: Request, response: Response, cost: int,
                  log_level: Optional[Union[int, str]] = None) -> Optional[Decision]:
    """The gate's verdict on a request: the headers of a pass added to the
    response, a denial or block raised as RateLimited. A policy keying by
    a body field reads the body (Starlette keeps it for the route)."""
    body = None
    if gate.reads_body:
        if readable_length(request.headers.get("content-length"), request.headers.get("transfer-encoding")) is None:
            body = unreadable
        else:
            body = partial(field, request.headers.get("content-type"), await request.body())
    # the scope as the ASGI middleware reads it (the path decoded, as every door has it)
    verdict = await gate.adecide_scope(request.scope, body=body, cost=cost)
    decision = verdict.decision
    if not verdict.checked and verdict.ending == "pass" and decision is None:
        return None
    request.state.ratekeeper = decision
    answer = verdict.answer
    log_verdict(log_level, verdict)
    if answer.status is not None:
        raise RateLimited(decision, answer)
    for header, value in answer.headers.items():
        response.headers[header] = value
    return decision
