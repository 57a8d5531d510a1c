"""Applying a policy to a request and shaping the response: shared by the
middleware and the decorator."""

from typing import Optional

from django.http import HttpRequest, HttpResponse, HttpResponseBase

from ratekeeper._ratekeeper import Decision
from ratekeeper.django.conf import Config, Policy, get_config
from ratekeeper.django.exceptions import Ratelimited
from ratekeeper.django.signals import rate_limited
from ratekeeper.http import denial_body, denial_headers, log_denial


def check(request: HttpRequest, policy: Policy) -> Optional[Decision]:
    """Checks the request's key under the policy; None when the key function
    says the request is not limited. The decision is kept on ``request.ratelimit``."""
    key = policy.key(request)
    if key is None:
        return None
    if isinstance(key, bytes):
        scoped: object = policy.scope.encode() + b":" + key
    else:
        scoped = f"{policy.scope}:{key}"
    decision = policy.limiter.check(scoped)
    request.ratelimit = decision  # type: ignore[attr-defined]
    request.limited = getattr(request, "limited", False) or not decision.allowed  # type: ignore[attr-defined]
    if not decision.allowed:
        config = get_config()
        log_denial(config.log_level, policy.scope, key, decision, request.method or "", request.path, config.log_keys)
        rate_limited.send(sender=Policy, request=request, decision=decision, scope=policy.scope)
    return decision


def deny(request: HttpRequest, decision: Decision, config: Config) -> HttpResponseBase:
    """The denial: Ratelimited raised (RAISE), the RESPONDER's answer, or a JSON 429."""
    if config.raise_exception:
        raise Ratelimited(decision)
    if config.responder is not None:
        response = config.responder(request, decision)
    else:
        response = HttpResponse(denial_body(decision), status=config.status, content_type="application/json")
    for name, value in denial_headers(decision).items():
        if name not in response:
            response[name] = value
    return response  # type: ignore[no-any-return]


def add_headers(response: HttpResponseBase, decision: Optional[Decision]) -> HttpResponseBase:
    """Adds the rate-limit headers of the decision, keeping any the view set."""
    if decision is not None:
        for name, value in decision.headers().items():
            if name not in response:
                response[name] = value
    return response
