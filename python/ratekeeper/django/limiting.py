"""Applying a policy to a request and shaping the response: shared by the
middleware and the decorator."""

from typing import Optional

from django.http import HttpRequest, HttpResponse, HttpResponseBase

from ratekeeper._ratekeeper import ConfigurationError, Decision
from ratekeeper._ratekeeper import Answer
from ratekeeper.django.conf import Ban, Config, Policy, get_config
from ratekeeper.django.exceptions import Ratelimited
from ratekeeper.django.keys import client_ip
from ratekeeper.django.signals import rate_limited
from ratekeeper.http import log_denial


def screen(request: HttpRequest, config: Config) -> Optional[HttpResponseBase]:
    """Policies that apply to every request: a listed client address (403
    when blocked, nothing more when safelisted) and FAIL2BAN/ALLOW2BAN
    strikes. Returns the response that ends the request, or None."""
    assert config.base is not None
    ip = client_ip(request, config.proxies)
    listed = config.base.screen(ip)
    if listed is not None:
        request.ratelimit = listed  # type: ignore[attr-defined]
        return None if listed.allowed else blocked(config)
    for ban in config.bans:
        if ban.matches(request):
            banned = _strike(config, ban, ip)
            if banned or not ban.allow:  # a fail2ban request, or the strike that bans
                return blocked(config)
    return None


def _strike(config: Config, ban: Ban, ip: str) -> bool:
    """Counts one strike of `ban` against `ip`; True when it banned the address."""
    assert config.base is not None
    return config.base.penalize(ip=ip, ban=ban.rule)


def penalize(request: HttpRequest, name: str) -> bool:
    """Counts a strike for the FAIL2BAN or ALLOW2BAN entry `name` against the
    request's client IP (say after a failed login); True when it banned the IP."""
    config = get_config()
    for ban in config.bans:
        if ban.name == name:
            return _strike(config, ban, client_ip(request, config.proxies))
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


def check(request: HttpRequest, policy: Policy) -> Optional[Decision]:
    """Checks the request's key under the policy; None when the key function
    says the request is not limited. The decision is kept on ``request.ratelimit``."""
    key = policy.key(request)
    if key is None:
        return None
    config = get_config()
    tier = None
    if policy is config.default and config.tier is not None:
        named = config.tier(request)
        tier = str(named) if named is not None and str(named) in config.tiers else None
    decision = policy.limiter.check(key, tier=tier, ip=client_ip(request, config.proxies))
    request.ratelimit = decision  # type: ignore[attr-defined]
    request.limited = getattr(request, "limited", False) or not decision.allowed  # type: ignore[attr-defined]
    if not decision.allowed and not decision.blocked:
        log_denial(config.log_level, config.responses, policy.scope, key, decision, request.method or "", request.path)
        rate_limited.send(sender=Policy, request=request, decision=decision, scope=policy.scope)
    return decision


def deny(request: HttpRequest, decision: Decision, config: Config) -> HttpResponseBase:
    """The denial: 403 for a blocked key, else Ratelimited raised (RAISE),
    the RESPONDER's answer, or a JSON 429."""
    if decision.blocked:
        return blocked(config)
    if config.raise_exception:
        raise Ratelimited(decision)
    if config.responder is None:
        return rendered(config.responses.answer(decision))
    response = config.responder(request, decision)
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
