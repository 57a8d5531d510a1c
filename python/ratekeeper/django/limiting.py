"""The Django door: a request's facts to the core's gate, and its verdict
to a response. Shared by the middleware and the decorator, in a sync form
and an async one that awaits the store on the event loop (the user is read
with ``request.auser()`` first; only a callable of the application's own,
which may touch the database, makes the whole decision run in a thread)."""

from typing import Any, Awaitable, Callable, Optional

from asgiref.sync import iscoroutinefunction, sync_to_async
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.http.response import ResponseHeaders

from ratekeeper._ratekeeper import Answer, Decision, Gate, Verdict
from ratekeeper.django.conf import Config, get_config
from ratekeeper.django.exceptions import Ratelimited
from ratekeeper.django.keys import body_field
from ratekeeper.django.signals import rate_limited
from ratekeeper.doors import atell_end, log_verdict, tell_end


def _user(request: HttpRequest) -> Optional[str]:
    """The signed-in user's id, or None."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return None
    return str(user.pk)


def decide(gate: Gate, request: HttpRequest) -> Verdict:
    """The gate's verdict on the request (blocking)."""
    meta = request.META
    return gate.decide(request.method or "GET", request.path_info, meta.get("HTTP_HOST") or meta.get("SERVER_NAME", ""),
                       meta.get("REMOTE_ADDR", ""), meta, meta.get("QUERY_STRING", ""), context=request,
                       body=lambda name: body_field(request, name), user=lambda: _user(request))


async def adecide(gate: Gate, request: HttpRequest, config: Config) -> Verdict:
    """``decide``, awaited: the store on the event loop, the user read with
    ``request.auser()`` first; in a thread when an application's own
    callable may touch the database."""
    reads_user, needs_thread = config.flags(gate)
    if needs_thread:
        return await sync_to_async(decide)(gate, request)  # type: ignore[no-any-return]
    if reads_user and hasattr(request, "auser") and not hasattr(request, "_cached_user"):
        # django.contrib.auth's lazy request.user reads this cache first
        request._cached_user = await request.auser()  # type: ignore[attr-defined]
    meta = request.META
    return await gate.adecide(request.method or "GET", request.path_info,
                              meta.get("HTTP_HOST") or meta.get("SERVER_NAME", ""), meta.get("REMOTE_ADDR", ""),
                              meta, meta.get("QUERY_STRING", ""), context=request,
                              body=lambda name: body_field(request, name), user=lambda: _user(request))


def penalize(request: HttpRequest, name: str) -> bool:
    """Counts a strike for the fail2ban or allow2ban entry `name` (FAIL2BAN
    and ALLOW2BAN settings, or the POLICY_FILE's) against the request's
    client IP (say after a failed login); True when it banned the IP."""
    config = get_config()
    assert config.gate is not None
    return config.gate.penalize(name, request.META.get("REMOTE_ADDR", ""), request.META)


def rendered(answer: Answer) -> HttpResponse:
    """The core's answer as a Django response."""
    response = HttpResponse(answer.body, status=answer.status)
    for name, value in answer.headers.items():
        response[name] = value
    return response


def _noted(request: HttpRequest, config: Config, verdict: Verdict) -> bool:
    """Keeps the decision on the request; True when it is a denial to report."""
    if verdict.decision is not None:
        request.ratelimit = verdict.decision  # type: ignore[attr-defined]
    denied = verdict.ending == "deny"
    request.limited = getattr(request, "limited", False) or denied  # type: ignore[attr-defined]
    log_verdict(config.log_level, verdict)
    return denied


def conclude(request: HttpRequest, config: Config, verdict: Verdict, block: bool = True) -> Optional[HttpResponseBase]:
    """The response that ends the request (the core's 403 or 429, the
    RESPONDER's, or Ratelimited raised with RAISE), or None to go on."""
    if _noted(request, config, verdict):
        rate_limited.send(sender=Config, request=request, decision=verdict.decision, scope=verdict.scope)
        if not block:
            return None
        if config.raise_exception:
            raise Ratelimited(verdict.decision)
        if config.responder is not None:
            return _with_denial_headers(config, verdict.decision, config.responder(request, verdict.decision))
    return None if verdict.ending == "pass" else rendered(verdict.answer)


async def aconclude(request: HttpRequest, config: Config, verdict: Verdict,
                    block: bool = True) -> Optional[HttpResponseBase]:
    """``conclude``, with the signal sent and an application's RESPONDER
    run as an async view would (awaited, or in a thread)."""
    if not _noted(request, config, verdict):
        return None if verdict.ending == "pass" else rendered(verdict.answer)
    await _asend(request=request, decision=verdict.decision, scope=verdict.scope)
    if not block:
        return None
    if config.raise_exception:
        raise Ratelimited(verdict.decision)
    responder = config.responder
    if responder is None:
        return rendered(verdict.answer)
    if iscoroutinefunction(responder):
        response = await responder(request, verdict.decision)
    else:
        response = await sync_to_async(responder)(request, verdict.decision)
    return _with_denial_headers(config, verdict.decision, response)


async def _asend(**sent: Any) -> None:
    """Sends ``rate_limited`` from async code: awaited with ``Signal.asend``
    (Django 5.0+); before it (Django 4.2 LTS) the receivers, all sync there,
    run in a thread as ``sync_to_async`` runs them."""
    asend = getattr(rate_limited, "asend", None)
    if asend is not None:
        await asend(sender=Config, **sent)
    else:
        await sync_to_async(rate_limited.send)(sender=Config, **sent)


def _with_denial_headers(config: Config, decision: Optional[Decision], response: Any) -> HttpResponseBase:
    if decision is not None:
        for name, value in config.responses.denial_headers(decision).items():
            if name not in response and name != "Content-Length":
                response[name] = value
    return response  # type: ignore[no-any-return]


def respond(verdict: Optional[Verdict], view: Callable[[], HttpResponseBase]) -> HttpResponseBase:
    """The response `view` gives, with a pass's rate-limit headers (in the
    configured style; none for a listed client), keeping any the view set.
    When the verdict awaits the response's end (a slot the request holds, a
    throttle that counts only some responses, or a reservation of meters
    settled by the response's headers), the gate is told when the
    server closes the response (after its last byte, a streamed one's too,
    or when the client hung up), or at once when the view raises."""
    if verdict is None or not verdict.awaits_end:
        return _headers(view(), verdict)
    try:
        response = view()
    except BaseException:
        tell_end(verdict, None)
        raise
    _told_at_close(response, verdict)
    return _headers(response, verdict)


async def arespond(verdict: Optional[Verdict], view: Callable[[], Awaitable[HttpResponseBase]]) -> HttpResponseBase:
    """``respond``, for a view awaited on the event loop."""
    if verdict is None or not verdict.awaits_end:
        return _headers(await view(), verdict)
    try:
        response = await view()
    except BaseException:
        await atell_end(verdict, None)
        raise
    _told_at_close(response, verdict)
    return _headers(response, verdict)


def _told_at_close(response: HttpResponseBase, verdict: Verdict) -> None:
    """Makes closing `response` (as Django's WSGI and ASGI handlers and its
    test client do, once it is sent) tell the gate its end, once."""
    closing = response.close
    told: list = []

    def close() -> None:
        try:
            closing()
        finally:
            if not told:
                told.append(True)
                tell_end(verdict, response.status_code, response.items())

    response.close = close  # type: ignore[method-assign]


def _stores_headers_as_known() -> bool:
    """Whether Django's ResponseHeaders keeps its headers as it has since
    Django 3.2: ``_store``, a dict of each lower-case name to its
    ``(name, value)``, which ``__setitem__`` fills once it has checked both."""
    try:
        headers = ResponseHeaders({"X-Probe": "1"})
        return type(headers._store) is dict and headers._store == {"x-probe": ("X-Probe", "1")}
    except Exception:  # (another Django: the public way)
        return False


_FAST_HEADERS = _stores_headers_as_known()


def _headers(response: HttpResponseBase, verdict: Optional[Verdict]) -> HttpResponseBase:
    """Adds a pass's rate-limit headers where the view set none of that name.
    The core's names are fixed ASCII and its values ASCII numbers and rule
    names, never a CR or LF: what ResponseHeaders' own checks (a tenth of a
    request's time in the bench site) would find, so they go into its store
    directly where it keeps them as Django 3.2 to 6.x do."""
    if verdict is None:
        return response
    headers = verdict.answer.headers
    if not headers:
        return response
    if _FAST_HEADERS and type(response.headers) is ResponseHeaders:
        store = response.headers._store
        for name, value in headers.items():
            store.setdefault(name.lower(), (name, value))
        return response
    for name, value in headers.items():
        if name not in response:
            response[name] = value
    return response
