"""ASGI middleware for Starlette, FastAPI, Django under ASGI, Quart, or any
ASGI app: the WSGI middleware's behaviour, awaited.

    from ratekeeper import Limiter
    from ratekeeper.asgi import RateLimitMiddleware
    app.add_middleware(RateLimitMiddleware, limiter=Limiter("10/second; 100/minute", "redis://127.0.0.1:6379/0"))

Each request is checked with ``await limiter.acheck(...)``: the event loop
never waits on Redis (one multiplexed connection per process carries every
check). Every limited response carries the rate-limit headers; a denied
request gets the core's 429 (``status``) with ``Retry-After`` and a JSON
body, or whatever ``responder(scope, receive, send, decision)`` sends; a
blocked client (its address or key on the blocklist) gets 403
(``blocked_status``) ``{"error":"blocked"}``. A refused websocket handshake
is closed with ``websocket_close_code`` (1008, policy violation). Lifespan
and other scopes pass through.
"""

import inspect
from typing import Awaitable, Callable, Iterable, List, Optional, Sequence, Tuple, Union

from ratekeeper._ratekeeper import Answer, Decision, Limiter, Responses, TrustedProxies
from ratekeeper.http import log_denial

Scope = dict
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]
KeyFunc = Callable[[Scope], Union[Optional[Union[str, bytes]], Awaitable[Optional[Union[str, bytes]]]]]
Responder = Callable[[Scope, Receive, Send, Decision], Awaitable[None]]


def header(scope: Scope, name: bytes) -> Optional[str]:
    """A request header of an ASGI scope (the first, as Latin-1 text), or None."""
    for key, value in scope.get("headers") or ():
        if key.lower() == name:
            return value.decode("latin-1")  # type: ignore[no-any-return]
    return None


def encoded(headers: Iterable[Tuple[str, str]]) -> List[Tuple[bytes, bytes]]:
    """Headers as ASGI sends them: lower-case Latin-1 bytes."""
    return [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers]


async def send_answer(answer: Answer, send: Send) -> None:
    """Sends an answer that ends an HTTP request (status, headers, body)."""
    await send({"type": "http.response.start", "status": answer.status,
                "headers": encoded(answer.headers.items())})
    await send({"type": "http.response.body", "body": answer.body})


class RateLimitMiddleware:
    """Limits every HTTP request (and websocket handshake) of an ASGI app by one limiter.

    - ``key(scope)`` names the caller (default: the client, ``client_key``); it may be a
      coroutine function; None lets the request through unlimited.
    - ``exempt``: path prefixes (or a callable taking the scope) never limited.
    - ``trusted_proxies``: address ranges whose X-Forwarded-For is believed.
    - ``ipv4_prefix`` (16-32, default 32) and ``ipv6_prefix`` (48-128,
      default 64): how much of the client IP names the client in the default
      key (an IPv6 client holds a whole /64).
    - ``status``, ``blocked_status``, ``headers`` (the header style: "all",
      "draft", "legacy" or "none"): as for ``ratekeeper.Responses``.
    - ``responder``: replaces the whole denial response.
    - ``cost(scope)``: units a request costs (default 1).
    - ``log_level`` and ``log_keys``: one line per denial on the
      ``ratekeeper.denials`` logger, as the WSGI middleware writes it.
    """

    def __init__(
        self,
        app: App,
        limiter: Limiter,
        key: Optional[KeyFunc] = None,
        exempt: Union[Sequence[str], Callable[[Scope], bool]] = (),
        trusted_proxies: Sequence[str] = (),
        ipv4_prefix: Optional[int] = None,
        ipv6_prefix: Optional[int] = None,
        status: Optional[int] = None,
        responder: Optional[Responder] = None,
        blocked_status: Optional[int] = None,
        cost: Optional[Callable[[Scope], int]] = None,
        log_level: Optional[Union[int, str]] = "INFO",
        log_keys: bool = False,
        headers: Optional[str] = None,
        websocket_close_code: int = 1008,
    ) -> None:
        if not isinstance(limiter, Limiter):
            raise TypeError(f"limiter must be a ratekeeper.Limiter, not {type(limiter).__name__}")
        self.app = app
        self.limiter = limiter
        self.proxies = TrustedProxies(list(trusted_proxies), ipv4_prefix=ipv4_prefix, ipv6_prefix=ipv6_prefix)
        self.key = key
        self.exempt = (exempt,) if isinstance(exempt, str) else exempt
        self.responses = Responses(status=status, blocked_status=blocked_status, headers=headers, log_keys=log_keys)
        self.responder = responder
        self.cost = cost
        self.log_level = log_level
        self.websocket_close_code = websocket_close_code

    def client_ip(self, scope: Scope) -> str:
        """The client's IP, believing X-Forwarded-For only from trusted proxies."""
        client = scope.get("client")
        peer = client[0] if client else ""
        return self.proxies.client_ip(peer, header(scope, b"x-forwarded-for"))

    def client_key(self, scope: Scope) -> str:
        """The client as the default key names it: its IP's network by the
        prefixes (an IPv6 client as its /64)."""
        client = scope.get("client")
        peer = client[0] if client else ""
        return self.proxies.client_key(peer, header(scope, b"x-forwarded-for"))

    def is_exempt(self, scope: Scope) -> bool:
        """Whether the request's path is exempt."""
        if callable(self.exempt):
            return bool(self.exempt(scope))
        path = scope.get("path") or "/"
        return any(path.startswith(prefix) for prefix in self.exempt)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self.is_exempt(scope):
            await self.app(scope, receive, send)
            return
        ip = self.client_ip(scope)
        limiter = self.limiter
        listed = limiter.screen(ip) if limiter.policies_ready else await limiter.ascreen(ip)
        if listed is not None:
            scope["ratekeeper.decision"] = listed
            await (self.app(scope, receive, send) if listed.allowed else self.refuse(scope, receive, send, listed))
            return
        key = await self.key_of(scope)
        if key is None:
            await self.app(scope, receive, send)
            return
        decision = await limiter.acheck(key, self.cost(scope) if self.cost else None, ip=ip)
        scope["ratekeeper.decision"] = decision
        if not decision.allowed:
            if not decision.blocked:
                log_denial(self.log_level, self.responses, "asgi", key, decision, scope.get("method", ""),
                           scope.get("path", ""))
            await self.refuse(scope, receive, send, decision)
            return
        extra = encoded(self.responses.pass_headers(decision).items())
        if not extra or scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", ())}
                message = dict(message, headers=[*message.get("headers", ()),
                                                 *(h for h in extra if h[0] not in present)])
            await send(message)

        await self.app(scope, receive, send_with_headers)

    async def key_of(self, scope: Scope) -> Optional[Union[str, bytes]]:
        """The request's key: ``key(scope)`` (awaited when it is a coroutine), else the client."""
        if self.key is None:
            return self.client_key(scope)
        key = self.key(scope)
        return await key if inspect.isawaitable(key) else key  # type: ignore[no-any-return]

    async def refuse(self, scope: Scope, receive: Receive, send: Send, decision: Decision) -> None:
        """The answer to a denied or blocked request: the core's (or the
        responder's, for a denial); a websocket handshake is closed."""
        if scope["type"] == "websocket":
            message = await receive()
            if message.get("type") == "websocket.connect":
                await send({"type": "websocket.close", "code": self.websocket_close_code})
            return
        if self.responder is not None and not decision.blocked:
            await self.responder(scope, receive, send, decision)
            return
        await send_answer(self.responses.answer(decision), send)

