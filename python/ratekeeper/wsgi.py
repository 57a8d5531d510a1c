"""WSGI middleware for Flask or any WSGI app.

    from ratekeeper import Limiter
    from ratekeeper.wsgi import RateLimitMiddleware
    app.wsgi_app = RateLimitMiddleware(app.wsgi_app, Limiter("10/second; 100/minute", store="redis://127.0.0.1:6379/0"))

Every limited response carries the rate-limit headers; a denied request gets
429 (``status``) with ``Retry-After`` and a JSON body, or whatever
``responder(environ, start_response, decision)`` returns. A blocked client
(its address or key on the blocklist) gets 403 (``blocked_status``)
``{"error": "blocked"}``, as from the Django and Rack middlewares.
"""

from typing import Any, Callable, Iterable, Optional, Sequence, Union

from http import HTTPStatus

from ratekeeper._ratekeeper import Answer, Decision, Limiter, Responses, TrustedProxies
from ratekeeper.http import log_denial

Environ = dict
StartResponse = Callable[..., Any]
KeyFunc = Callable[[Environ], Optional[Union[str, bytes]]]
Responder = Callable[[Environ, StartResponse, Decision], Iterable[bytes]]

def _status_line(status: int) -> str:
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"{status} Rate Limited"


class RateLimitMiddleware:
    """Limits every request of a WSGI app by one limiter.

    - ``key(environ)`` names the caller (default: the client, ``client_key``); returning
      None lets the request through unlimited.
    - ``exempt``: path prefixes (or a callable taking the environ) never limited.
    - ``trusted_proxies``: address ranges whose X-Forwarded-For is believed.
    - ``ipv4_prefix`` (16-32, default 32) and ``ipv6_prefix`` (48-128,
      default 64): how much of the client IP names the client in the default
      key (an IPv6 client holds a whole /64).
    - ``status``: the status of a denial (429); ``responder`` replaces the
      whole denial response.
    - ``blocked_status``: the status of a blocked client's answer (403).
    - ``headers``: which rate-limit headers to send: "all" (default),
      "draft", "legacy" or "none" (see README).
    - ``cost(environ)``: units a request costs (default 1).
    - ``log_level``: one line per denial on the ``ratekeeper.denials`` logger
      at this level ("INFO"; None: off), with the key hashed unless ``log_keys``.
    """

    def __init__(
        self,
        app: Callable[[Environ, StartResponse], Iterable[bytes]],
        limiter: Limiter,
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
    ) -> None:
        if not isinstance(limiter, Limiter):
            raise TypeError(f"limiter must be a ratekeeper.Limiter, not {type(limiter).__name__}")
        if isinstance(exempt, str):
            exempt = (exempt,)
        self.app = app
        self.limiter = limiter
        self.proxies = TrustedProxies(list(trusted_proxies), ipv4_prefix=ipv4_prefix, ipv6_prefix=ipv6_prefix)
        self.key = key or self.client_key
        self.exempt = exempt
        self.responses = Responses(status=status, blocked_status=blocked_status, headers=headers, log_keys=log_keys)
        self.responder = responder or self.deny
        self.cost = cost
        self.log_level = log_level

    def client_ip(self, environ: Environ) -> str:
        """The client's IP, believing X-Forwarded-For only from trusted proxies."""
        return self.proxies.client_ip(environ.get("REMOTE_ADDR", ""), environ.get("HTTP_X_FORWARDED_FOR"))

    def client_key(self, environ: Environ) -> str:
        """The client as the default key names it: its IP's network by the
        prefixes (an IPv6 client as its /64)."""
        return self.proxies.client_key(environ.get("REMOTE_ADDR", ""), environ.get("HTTP_X_FORWARDED_FOR"))

    def is_exempt(self, environ: Environ) -> bool:
        """Whether the request's path is exempt."""
        if callable(self.exempt):
            return bool(self.exempt(environ))
        path = environ.get("PATH_INFO", "") or "/"
        return any(path.startswith(prefix) for prefix in self.exempt)

    def deny(self, environ: Environ, start_response: StartResponse, decision: Decision) -> Iterable[bytes]:
        """The default denial: the core's answer (``status``, Retry-After, a JSON body)."""
        return self.render(self.responses.answer(decision), start_response)

    def blocked(self, start_response: StartResponse) -> Iterable[bytes]:
        """The answer to a blocked client: ``blocked_status`` with a JSON body."""
        return self.render(self.responses.blocked(), start_response)

    @staticmethod
    def render(answer: Answer, start_response: StartResponse) -> Iterable[bytes]:
        """An answer that ends the request, as WSGI sends it."""
        assert answer.status is not None
        start_response(_status_line(answer.status), list(answer.headers.items()))
        return [answer.body]

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        if self.is_exempt(environ):
            return self.app(environ, start_response)
        ip = self.client_ip(environ)
        listed = self.limiter.screen(ip)
        if listed is not None:
            environ["ratekeeper.decision"] = listed
            return self.app(environ, start_response) if listed.allowed else self.blocked(start_response)
        key = self.key(environ)
        if key is None:
            return self.app(environ, start_response)
        cost = self.cost(environ) if self.cost else None
        decision = self.limiter.check(key, cost, ip=ip)
        environ["ratekeeper.decision"] = decision
        if decision.blocked:
            return self.blocked(start_response)
        if decision.safelisted:
            return self.app(environ, start_response)
        if not decision.allowed:
            method, path = environ.get("REQUEST_METHOD", ""), environ.get("PATH_INFO", "")
            log_denial(self.log_level, self.responses, "wsgi", key, decision, method, path)
            return self.responder(environ, start_response, decision)
        extra = list(self.responses.pass_headers(decision).items())

        def start_with_headers(status: str, headers: list, exc_info: Any = None) -> Any:
            present = {name.lower() for name, _ in headers}
            headers = list(headers) + [(n, v) for n, v in extra if n.lower() not in present]
            return start_response(status, headers, exc_info) if exc_info else start_response(status, headers)

        return self.app(environ, start_with_headers)
