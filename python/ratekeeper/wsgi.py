"""WSGI middleware for Flask or any WSGI app: the core's gate at a WSGI door.

    from ratekeeper import Limiter
    from ratekeeper.wsgi import RateLimitMiddleware
    app.wsgi_app = RateLimitMiddleware(app.wsgi_app, Limiter("10/second; 100/minute", store="redis://127.0.0.1:6379/0"))
    # or every door's policy file (throttles, bans, exempt paths, responses):
    app.wsgi_app = RateLimitMiddleware(app.wsgi_app, policy="policy.toml")

Every limited response carries the rate-limit headers; a denied request gets
429 (``status``) with ``Retry-After`` and a JSON body, or whatever
``responder(environ, start_response, decision)`` returns. A blocked client
(its address or key on the blocklist) gets 403 (``blocked_status``)
``{"error": "blocked"}``, as from every other door.
"""

import io
from http import HTTPStatus
from typing import Any, Callable, Iterable, Iterator, List, Optional, Sequence, Union

from ratekeeper._ratekeeper import Answer, Decision, Limiter
from ratekeeper.body import UNREADABLE, Found, field, readable_length
from ratekeeper.doors import door_gate, log_verdict, tell_end

Environ = dict
StartResponse = Callable[..., Any]
KeyFunc = Callable[[Environ], Optional[Union[str, bytes]]]
Responder = Callable[[Environ, StartResponse, Decision], Iterable[bytes]]

def _status_line(status: int) -> str:
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"{status} Rate Limited"


def body_field(environ: Environ, name: str) -> Found:
    """Field `name` of a posted form or JSON object body (read once, at most
    ratekeeper.body.MAX_BODY bytes, and put back for the app), as
    ratekeeper.body.field answers it; UNREADABLE for a body too long or
    without a length."""
    length = readable_length(environ.get("CONTENT_LENGTH"), environ.get("HTTP_TRANSFER_ENCODING"))
    if length is None:
        return UNREADABLE
    if length == 0:
        return None
    raw = environ.get("ratekeeper.body")
    if raw is None:
        raw = environ["wsgi.input"].read(length)
        environ["ratekeeper.body"] = raw
        environ["wsgi.input"] = io.BytesIO(raw)
    return field(environ.get("CONTENT_TYPE"), raw, name)


class RateLimitMiddleware:
    """Limits the requests of a WSGI app: by one limiter (the arguments
    below), or by a policy (``policy=``: a policy file's path or a dict of
    the same shape, as the edge server and the Rack and Django middlewares
    read it; its store, or ``limiter``'s when one is given).

    - ``key(environ)`` names the caller (default: the client, ``client_key``); returning
      None lets the request through unlimited.
    - ``exempt``: path prefixes (or a callable taking the environ) never limited.
    - ``trusted_proxies``: address ranges whose X-Forwarded-For is believed
      (by the gate, ``client_ip`` and ``client_key``; with ``policy=``, the
      policy's ``trusted_proxies`` and prefixes instead).
    - ``ipv4_prefix`` (16-32, default 32) and ``ipv6_prefix`` (48-128,
      default 64): how much of the client IP names the client in the default
      key (an IPv6 client holds a whole /64).
    - ``status``: the status of a denial (429); ``responder`` replaces the
      whole denial response.
    - ``blocked_status``: the status of a blocked client's answer (403).
    - ``headers``: which rate-limit headers to send: "all" (default),
      "draft", "legacy" or "none" (see docs/responses.md).
    - ``cost(environ)``: units a request costs (default 1).
    - ``log_level``: one line per denial on the ``ratekeeper.denials`` logger
      at this level ("INFO"; None: off), with the key hashed unless ``log_keys``.
    """

    def __init__(
        self,
        app: Callable[[Environ, StartResponse], Iterable[bytes]],
        limiter: Optional[Limiter] = None,
        key: Optional[KeyFunc] = None,
        exempt: Union[Sequence[str], Callable[[Environ], bool]] = (),
        trusted_proxies: Sequence[str] = (),
        ipv4_prefix: Optional[int] = None,
        ipv6_prefix: Optional[int] = None,
        status: Optional[int] = None,
        responder: Optional[Responder] = None,
        blocked_status: Optional[int] = None,
        cost: Optional[Callable[[Environ], int]] = None,
        log_level: Optional[Union[int, str]] = "INFO",
        log_keys: bool = False,
        headers: Optional[str] = None,
        policy: Any = None,
    ) -> None:
        given = dict(key=key, exempt=exempt, trusted_proxies=trusted_proxies, ipv4_prefix=ipv4_prefix,
                     ipv6_prefix=ipv6_prefix, status=status, blocked_status=blocked_status, headers=headers,
                     log_keys=log_keys)
        self.gate = door_gate("RateLimitMiddleware", limiter, policy, given)
        self.app = app
        self.limiter = limiter
        self.proxies = self.gate.trusted_proxies  # the client the gate names, policy= or not
        self.responder = responder
        self.cost = cost
        self.log_level = log_level

    def client_ip(self, environ: Environ) -> str:
        """The client's IP, believing X-Forwarded-For only from trusted proxies
        (the policy's, with ``policy=``)."""
        return self.proxies.client_ip(environ.get("REMOTE_ADDR", ""), environ.get("HTTP_X_FORWARDED_FOR"))

    def client_key(self, environ: Environ) -> str:
        """The client as the default key names it: its IP's network by the
        prefixes (an IPv6 client as its /64); with ``policy=``, by the
        policy's trusted proxies and prefixes."""
        return self.proxies.client_key(environ.get("REMOTE_ADDR", ""), environ.get("HTTP_X_FORWARDED_FOR"))

    @staticmethod
    def render(answer: Answer, start_response: StartResponse) -> Iterable[bytes]:
        """An answer that ends the request, as WSGI sends it."""
        assert answer.status is not None
        start_response(_status_line(answer.status), list(answer.headers.items()))
        return [answer.body]

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        # PEP 3333 hands the path's bytes over as Latin-1 text: the path as
        # every door has it is those bytes read as UTF-8 (as Django reads them)
        path = (environ.get("PATH_INFO", "") or "/").encode("latin-1", "replace").decode("utf-8", "replace")
        verdict = self.gate.decide(
            environ.get("REQUEST_METHOD", "GET"), path, environ.get("HTTP_HOST") or environ.get("SERVER_NAME", ""),
            environ.get("REMOTE_ADDR", ""), environ, environ.get("QUERY_STRING", ""), context=environ,
            body=lambda name: body_field(environ, name), cost=self.cost(environ) if self.cost else None)
        if verdict.decision is not None:
            environ["ratekeeper.decision"] = verdict.decision
        answer = verdict.answer
        log_verdict(self.log_level, verdict)
        if verdict.ending == "deny" and self.responder is not None:
            return self.responder(environ, start_response, verdict.decision)
        if answer.status is not None:
            return self.render(answer, start_response)
        extra = list(answer.headers.items())
        awaits_end = verdict.awaits_end
        if not extra and not awaits_end:
            return self.app(environ, start_response)
        started: List[Any] = []

        def start_with_headers(status: str, headers: list, exc_info: Any = None) -> Any:
            started[:] = [int(status[:3]), headers]
            present = {name.lower() for name, _ in headers}
            headers = list(headers) + [(n, v) for n, v in extra if n.lower() not in present]
            return start_response(status, headers, exc_info) if exc_info else start_response(status, headers)

        if not awaits_end:
            return self.app(environ, start_with_headers)
        # a slot the request holds, a unit a throttle counts only for some
        # responses, or a reservation of meters settled by the response's
        # headers, is told when the server closes the body: after its last
        # byte, or when the client hung up
        try:
            body = self.app(environ, start_with_headers)
        except BaseException:
            tell_end(verdict, None)
            raise
        return Ended(body, lambda: tell_end(verdict, *(started or [None])))


class Ended:
    """A WSGI body that calls `ended` once when the server closes it (PEP
    3333: after the last byte is sent, or when sending failed), after the
    body's own ``close``."""

    def __init__(self, body: Iterable[bytes], ended: Callable[[], None]) -> None:
        self.body = body
        self.ended: Optional[Callable[[], None]] = ended

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.body)

    def close(self) -> None:
        try:
            close = getattr(self.body, "close", None)
            if close is not None:
                close()
        finally:
            ended, self.ended = self.ended, None
            if ended is not None:
                ended()
