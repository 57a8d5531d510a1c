"""ASGI middleware for Starlette, FastAPI, Django under ASGI, Quart, or any
ASGI app: the core's gate at an ASGI door, awaited.

    from ratekeeper import Limiter
    from ratekeeper.asgi import RateLimitMiddleware
    app.add_middleware(RateLimitMiddleware, limiter=Limiter("10/second; 100/minute", "redis://127.0.0.1:6379/0"))
    # or every door's policy file:
    app.add_middleware(RateLimitMiddleware, policy="policy.toml")

Each request is decided with ``await gate.adecide_scope(scope)``: the event loop
never waits on Redis (one multiplexed connection per process carries every
check). Every limited response carries the rate-limit headers; a denied
request gets the core's 429 (``status``) with ``Retry-After`` and a JSON
body, or whatever ``responder(scope, receive, send, decision)`` sends; a
blocked client (its address or key on the blocklist) gets 403
(``blocked_status``) ``{"error":"blocked"}``. A refused websocket handshake
is closed with ``websocket_close_code`` (1008, policy violation). Lifespan
and other scopes pass through. The policy's callables (keys, tiers,
``exempt``) are called with the scope, on the loop; a ``key`` given here may
be a coroutine function.
"""

import inspect
from functools import partial
from typing import Any, Awaitable, Callable, List, Optional, Sequence, Tuple, Union

from ratekeeper._ratekeeper import Answer, Decision, Limiter
from ratekeeper.body import MAX_BODY, field, readable_length, unreadable
from ratekeeper.doors import atell_end, door_gate, log_verdict

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


async def read_body(scope: Scope, receive: Receive) -> Tuple[Optional[bytes], Receive]:
    """An HTTP request's body, read ahead of the app for a policy's
    ``identity:FIELD`` key when its ``Content-Length`` is at most
    ``MAX_BODY`` (b"" when it has none; None when it has one the door may
    not read, and nothing is read), and the ``receive`` the app is then
    given: every message read, then the rest."""
    length = readable_length(header(scope, b"content-length"), header(scope, b"transfer-encoding"))
    if length is None:
        return None, receive
    if length == 0:
        return b"", receive
    read: List[dict] = []
    raw = b""
    while True:
        message = await receive()
        read.append(message)
        if message["type"] != "http.request":  # the client went away
            return None, _replaying(read, receive)
        raw += message.get("body", b"")
        if len(raw) > MAX_BODY:
            return None, _replaying(read, receive)
        if not message.get("more_body", False):
            return raw, _replaying(read, receive)


def _replaying(read: List[dict], receive: Receive) -> Receive:
    async def replay() -> dict:
        return read.pop(0) if read else await receive()

    return replay


async def send_answer(answer: Answer, send: Send) -> None:
    """Sends an answer that ends an HTTP request (status, headers, body)."""
    await send({"type": "http.response.start", "status": answer.status,
                "headers": answer.asgi_headers})
    await send({"type": "http.response.body", "body": answer.body})


def _given_key(scope: Scope) -> Optional[Union[str, bytes]]:
    """The key the door's own ``key`` gave (awaited before the gate decides)."""
    return scope.get("ratekeeper.key")  # type: ignore[no-any-return]


class RateLimitMiddleware:
    """Limits every HTTP request (and websocket handshake) of an ASGI app:
    by one limiter (the arguments below), or by a policy (``policy=``: a
    policy file's path or a dict of the same shape; its store, or
    ``limiter``'s when one is given).

    - ``key(scope)`` names the caller (default: the client, ``client_key``); it may be a
      coroutine function; None lets the request through unlimited.
    - ``exempt``: path prefixes (or a callable taking the scope) never limited.
    - ``trusted_proxies``: address ranges whose X-Forwarded-For is believed
      (by the gate, ``client_ip`` and ``client_key``; with ``policy=``, the
      policy's ``trusted_proxies`` and prefixes instead).
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
        limiter: Optional[Limiter] = None,
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
        policy: Any = None,
    ) -> None:
        given = dict(key=_given_key if key is not None else None, exempt=exempt, trusted_proxies=trusted_proxies,
                     ipv4_prefix=ipv4_prefix, ipv6_prefix=ipv6_prefix, status=status,
                     blocked_status=blocked_status, headers=headers, log_keys=log_keys)
        self.gate = door_gate("RateLimitMiddleware", limiter, policy, given)
        self.app = app
        self.limiter = limiter
        self.proxies = self.gate.trusted_proxies  # the client the gate names, policy= or not
        self.key = key
        self.responder = responder
        self.cost = cost
        self.log_level = log_level
        self.websocket_close_code = websocket_close_code

    def client_ip(self, scope: Scope) -> str:
        """The client's IP, believing X-Forwarded-For only from trusted proxies
        (the policy's, with ``policy=``)."""
        client = scope.get("client")
        peer = client[0] if client else ""
        return self.proxies.client_ip(peer, header(scope, b"x-forwarded-for"))

    def client_key(self, scope: Scope) -> str:
        """The client as the default key names it: its IP's network by the
        prefixes (an IPv6 client as its /64); with ``policy=``, by the
        policy's trusted proxies and prefixes."""
        client = scope.get("client")
        peer = client[0] if client else ""
        return self.proxies.client_key(peer, header(scope, b"x-forwarded-for"))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if self.key is not None:
            found = self.key(scope)
            scope["ratekeeper.key"] = await found if inspect.isawaitable(found) else found
        body = None
        if self.gate.reads_body and scope["type"] == "http":
            raw, receive = await read_body(scope, receive)
            body = unreadable if raw is None else partial(field, header(scope, b"content-type"), raw)
        verdict = await self.gate.adecide_scope(scope, body=body, cost=self.cost(scope) if self.cost else None)
        decision = verdict.decision  # (each read of a verdict's field makes a new object)
        if decision is not None:
            scope["ratekeeper.decision"] = decision
        ending = verdict.ending
        log_verdict(self.log_level, verdict)
        if ending != "pass":
            await self.refuse(scope, receive, send, decision, verdict.answer, ending == "deny")
            return
        if scope["type"] == "http":
            send = verdict.answer.asgi_send(send)
        if not verdict.awaits_end:
            await self.app(scope, receive, send)
            return
        # a slot the request holds (a websocket's: while it is open), a unit
        # a throttle counts only for some responses, or a reservation of
        # meters settled by the response's headers, is told when the app
        # returns: its response sent, the client gone, or raised
        started: List[Any] = []
        try:
            await self.app(scope, receive, status_seen(send, started))
        except BaseException:
            await atell_end(verdict, None)
            raise
        await atell_end(verdict, *(started or [None]))

    async def refuse(self, scope: Scope, receive: Receive, send: Send, decision: Optional[Decision],
                     answer: Answer, denied: bool) -> None:
        """The answer to a denied or blocked request: the core's (or the
        responder's, for a denial); a websocket handshake is closed."""
        if scope["type"] == "websocket":
            message = await receive()
            if message.get("type") == "websocket.connect":
                await send({"type": "websocket.close", "code": self.websocket_close_code})
            return
        if self.responder is not None and denied:
            await self.responder(scope, receive, send, decision)  # type: ignore[arg-type]
            return
        await send_answer(answer, send)


def status_seen(send: Send, started: List[Any]) -> Send:
    """``send``, noting the response's status and headers in `started` as
    it starts (``[status, headers]``)."""

    async def sending(message: Any) -> None:
        if message["type"] == "http.response.start":
            started[:] = [message["status"], message.get("headers") or ()]
        await send(message)

    return sending
