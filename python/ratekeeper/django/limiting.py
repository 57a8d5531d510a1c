"""Applying a policy to a request and shaping the response: shared by the
middleware and the decorator, in a sync form and an async one that awaits
the check on the event loop (no thread: only a key function or tier of the
application's own, which may touch the database, runs in one)."""

from typing import Any, Optional, Tuple, Union

from asgiref.sync import iscoroutinefunction, sync_to_async
from django.http import HttpRequest, HttpResponse, HttpResponseBase

from ratekeeper._ratekeeper import Answer, ConfigurationError, Decision
from ratekeeper.django.conf import Ban, Config, Policy, get_config
from ratekeeper.django.exceptions import Ratelimited
from ratekeeper.django.keys import KeyFunc, client_ip, client_key, kind_of
from ratekeeper.django.signals import rate_limited
from ratekeeper.http import log_denial

Key = Optional[Union[str, bytes]]
Outcome = Tuple[Optional[Decision], Optional[HttpResponseBase]]


def _listed(request: HttpRequest, config: Config, listed: Optional[Decision]) -> Optional[HttpResponseBase]:
    """The end of a request whose client address is listed (403 when blocked), or None."""
    if listed is None:
        return None
    request.ratelimit = listed  # type: ignore[attr-defined]
    return None if listed.allowed else blocked(config)


def screen(request: HttpRequest, config: Config) -> Optional[HttpResponseBase]:
    """Policies that apply to every request: a listed client address (403
    when blocked, nothing more when safelisted) and FAIL2BAN/ALLOW2BAN
    strikes. Returns the response that ends the request, or None."""
    assert config.base is not None
    listed = config.base.screen(client_ip(request, config.proxies))
    ended = _listed(request, config, listed)
    if ended is not None or listed is not None:
        return ended
    for ban in config.bans:
        if ban.matches(request):
            banned = _strike(config, ban, client_key(request, config.proxies))
            if banned or not ban.allow:  # a fail2ban request, or the strike that bans
                return blocked(config)
    return None


async def ascreen(request: HttpRequest, config: Config) -> Optional[HttpResponseBase]:
    """``screen``, awaited: the address lists are read off the event loop
    when they are not held yet, and strikes are counted off it."""
    base = config.base
    assert base is not None
    ip = client_ip(request, config.proxies)
    listed = base.screen(ip) if base.policies_ready else await base.ascreen(ip)
    ended = _listed(request, config, listed)
    if ended is not None or listed is not None:
        return ended
    for ban in config.bans:
        if ban.matches(request):
            banned = await base.apenalize(ip=client_key(request, config.proxies), ban=ban.rule)
            if banned or not ban.allow:
                return blocked(config)
    return None


def _strike(config: Config, ban: Ban, ip: str) -> bool:
    """Counts one strike of `ban` against the client `ip` (its network, as
    ``client_key`` names it); True when it banned the client."""
    assert config.base is not None
    return config.base.penalize(ip=ip, ban=ban.rule)


def penalize(request: HttpRequest, name: str) -> bool:
    """Counts a strike for the FAIL2BAN or ALLOW2BAN entry `name` against the
    request's client IP (say after a failed login); True when it banned the IP."""
    config = get_config()
    for ban in config.bans:
        if ban.name == name:
            return _strike(config, ban, client_key(request, config.proxies))
    raise ConfigurationError(f"no FAIL2BAN or ALLOW2BAN entry is named {name!r}: known {[b.name for b in config.bans]}")


def rendered(answer: Answer) -> HttpResponse:
    """The core's answer as a Django response."""
    response = HttpResponse(answer.body, status=answer.status)
    for name, value in answer.headers.items():
        response[name] = value
    return response


def blocked(config: Config) -> HttpResponse:
    """The answer to a blocked request: BLOCKED_STATUS (403) with a JSON body."""
    return rendered(config.responses.blocked())


def _tier(request: HttpRequest, config: Config, policy: Policy, named: Any) -> Optional[str]:
    """The tier a TIER callable named, when it is one of TIERS (for RULES only)."""
    if policy is not config.default or named is None:
        return None
    return str(named) if str(named) in config.tiers else None


def _noted(request: HttpRequest, config: Config, policy: Policy, key: Key, decision: Decision) -> bool:
    """Keeps the decision on the request; True when it is a denial to report."""
    request.ratelimit = decision  # type: ignore[attr-defined]
    request.limited = getattr(request, "limited", False) or not decision.allowed  # type: ignore[attr-defined]
    if decision.allowed or decision.blocked:
        return False
    log_denial(config.log_level, config.responses, policy.scope, key or b"", decision, request.method or "",
               request.path)
    return True


def check(request: HttpRequest, policy: Policy) -> Optional[Decision]:
    """Checks the request's key under the policy; None when the key function
    says the request is not limited. The decision is kept on ``request.ratelimit``."""
    key = policy.key(request)
    if key is None:
        return None
    config = get_config()
    named = config.tier(request) if config.tier is not None and policy is config.default else None
    decision = policy.limiter.check(key, tier=_tier(request, config, policy, named),
                                    ip=client_ip(request, config.proxies))
    if _noted(request, config, policy, key, decision):
        rate_limited.send(sender=Policy, request=request, decision=decision, scope=policy.scope)
    return decision


async def _call(func: Any, request: HttpRequest) -> Any:
    """An application's own function of the request: awaited when it is a
    coroutine function, else in a thread (it may touch the database)."""
    if iscoroutinefunction(func):
        return await func(request)
    return await sync_to_async(func)(request)


async def akey(func: KeyFunc, request: HttpRequest) -> Key:
    """The request's key, for an async view: a built-in key reads the user
    with ``request.auser()`` first (so reading it touches no database on the
    event loop); an application's own key function runs as ``_call`` does."""
    kind = kind_of(func)
    if kind == "custom":
        return await _call(func, request)  # type: ignore[no-any-return]
    if kind == "user" and hasattr(request, "auser") and not hasattr(request, "_cached_user"):
        # django.contrib.auth's lazy request.user reads this cache first
        request._cached_user = await request.auser()  # type: ignore[attr-defined]
    return func(request)


async def acheck(request: HttpRequest, policy: Policy) -> Optional[Decision]:
    """``check``, awaited: ``await limiter.acheck`` on the event loop."""
    key = await akey(policy.key, request)
    if key is None:
        return None
    config = get_config()
    use_tier = config.tier is not None and policy is config.default
    named = await _call(config.tier, request) if use_tier else None
    decision = await policy.limiter.acheck(key, tier=_tier(request, config, policy, named),
                                           ip=client_ip(request, config.proxies))
    if _noted(request, config, policy, key, decision):
        await rate_limited.asend(sender=Policy, request=request, decision=decision, scope=policy.scope)
    return decision


def deny(request: HttpRequest, decision: Decision, config: Config) -> HttpResponseBase:
    """The denial: 403 for a blocked key, else Ratelimited raised (RAISE),
    the RESPONDER's answer, or the core's 429."""
    if decision.blocked:
        return blocked(config)
    if config.raise_exception:
        raise Ratelimited(decision)
    if config.responder is None:
        return rendered(config.responses.answer(decision))
    return _with_denial_headers(config, decision, config.responder(request, decision))


async def adeny(request: HttpRequest, decision: Decision, config: Config) -> HttpResponseBase:
    """``deny``, with a RESPONDER of the application's own run as ``_call`` does."""
    if decision.blocked or config.raise_exception or config.responder is None:
        return deny(request, decision, config)
    responder = config.responder
    if iscoroutinefunction(responder):
        response = await responder(request, decision)
    else:
        response = await sync_to_async(responder)(request, decision)
    return _with_denial_headers(config, decision, response)


def _with_denial_headers(config: Config, decision: Decision, response: Any) -> HttpResponseBase:
    for name, value in config.responses.denial_headers(decision).items():
        if name not in response and name != "Content-Length":
            response[name] = value
    return response  # type: ignore[no-any-return]


def add_headers(response: HttpResponseBase, decision: Optional[Decision]) -> HttpResponseBase:
    """Adds the rate-limit headers of the decision in the configured style
    (none for a listed key), keeping any the view set."""
    if decision is not None:
        for name, value in get_config().responses.pass_headers(decision).items():
            if name not in response:
                response[name] = value
    return response
