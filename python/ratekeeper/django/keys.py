"""Key functions: who a request counts against.

A key spec is ``"ip"``, ``"user"``, ``"user_or_ip"``, ``"header:X-Api-Key"``,
``"get:field"``, ``"post:field"``, ``"identity:field"`` (a form or JSON body
field that names a person, trimmed and lower-cased, as ``field=value``;
blank or absent: not limited), the dotted path of a callable, or a callable
``f(request) -> str | bytes | None``. None means "not limited".
"""

from typing import Any, Callable, Optional, Union

from django.http import HttpRequest
from django.http.request import RawPostDataException
from django.utils.module_loading import import_string

from ratekeeper._ratekeeper import ConfigurationError, TrustedProxies, identity
from ratekeeper.body import UNREADABLE, Found, field, readable_length

Key = Optional[Union[str, bytes]]
KeyFunc = Callable[[HttpRequest], Key]


def client_ip(request: HttpRequest, proxies: TrustedProxies) -> str:
    """The client's IP; X-Forwarded-For counts only when REMOTE_ADDR is a trusted proxy."""
    return proxies.client_ip(request.META.get("REMOTE_ADDR", ""), request.META.get("HTTP_X_FORWARDED_FOR"))


def client_key(request: HttpRequest, proxies: TrustedProxies) -> str:
    """The client as the key ``ip`` and address bans name it: its IP's network
    (an IPv6 client as its /64, IPV4_PREFIX and IPV6_PREFIX say otherwise)."""
    return proxies.client_key(request.META.get("REMOTE_ADDR", ""), request.META.get("HTTP_X_FORWARDED_FOR"))


def _user_pk(request: HttpRequest) -> Optional[str]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return None
    return str(user.pk)


def body_field(request: HttpRequest, name: str) -> Found:
    """Field `name` of the request body, as every door reads it
    (ratekeeper.body: a form or JSON object body of at most MAX_BODY bytes;
    a string, a list for a repeated form field, None when absent or not a
    string); UNREADABLE for a body the door may not read while the app may
    (too long, without a length, multipart, a type it does not parse, or
    one the app has read as a stream). Django gives only the bytes."""
    length = readable_length(request.META.get("CONTENT_LENGTH"), request.META.get("HTTP_TRANSFER_ENCODING"))
    if length is None:
        return UNREADABLE
    if length == 0:
        return None
    try:
        raw = request.body
    except RawPostDataException:  # read as a stream (a multipart form Django parsed, say)
        return UNREADABLE
    return field(request.META.get("CONTENT_TYPE"), raw, name)


def kind_of(func: KeyFunc) -> str:
    """How an async view awaits a key function: "user" (read the user first,
    with ``request.auser()``, then call it), "plain" (call it: it reads only
    the request), or "custom" (the application's own: in a thread, as it may
    touch the database, unless it is a coroutine function)."""
    return getattr(func, "ratekeeper_kind", "custom")


def _kind(func: Any, kind: str, source: Optional[str] = None) -> KeyFunc:
    func.ratekeeper_kind = kind
    if source is not None:
        func.ratekeeper_source = source  # what a policy names it: the core reads it itself
    return func  # type: ignore[no-any-return]


def key_function(spec: object, proxies: TrustedProxies) -> KeyFunc:
    """The key function a spec names; raises ConfigurationError for a bad spec."""
    if callable(spec):
        return spec  # type: ignore[return-value]
    built = _built_in(spec, proxies)
    if built is not None:
        return built
    if isinstance(spec, str) and "." in spec:
        try:
            func = import_string(spec)
        except ImportError as exc:
            raise ConfigurationError(f"invalid key {spec!r}: cannot import it ({exc})") from None
        if not callable(func):
            raise ConfigurationError(f"invalid key {spec!r}: it is not callable")
        return func  # type: ignore[no-any-return]
    raise ConfigurationError(f"invalid key {spec!r}: use 'ip', 'user', 'user_or_ip', 'header:NAME', 'get:FIELD', 'post:FIELD', 'identity:FIELD', a dotted path or a callable")


def _built_in(spec: object, proxies: TrustedProxies) -> Optional[KeyFunc]:
    """A built-in key function, marked with its kind (see kind_of); None for other specs."""
    if not isinstance(spec, str) or not spec:
        raise ConfigurationError(f"invalid key {spec!r}: use 'ip', 'user', 'user_or_ip', 'header:NAME', 'get:FIELD', 'post:FIELD', 'identity:FIELD', a dotted path or a callable")
    if spec == "ip":
        return _kind(lambda request: client_key(request, proxies), "plain", "ip")
    if spec == "user":
        return _kind(lambda request: _user_pk(request), "user")
    if spec == "user_or_ip":

        def user_or_ip(request: HttpRequest) -> str:
            pk = _user_pk(request)
            return f"user:{pk}" if pk is not None else f"ip:{client_key(request, proxies)}"

        return _kind(user_or_ip, "user")
    kind, _, name = spec.partition(":")
    if name and kind == "header":
        meta = "HTTP_" + name.upper().replace("-", "_")

        def header(request: HttpRequest) -> Optional[bytes]:
            # the header's bytes as they came (WSGI and ASGI both give them
            # decoded as Latin-1), as Rack passes them: one key in both
            value = request.META.get(meta)
            return value.encode("latin-1", "replace") if value else None

        return _kind(header, "plain", f"header:{name}")
    if name and kind == "get":
        return _kind(lambda request: request.GET.get(name) or None, "plain", f"query:{name}")
    if name and kind == "post":
        return _kind(lambda request: request.POST.get(name) or None, "plain")
    if name and kind == "identity":

        def person(request: HttpRequest) -> Optional[str]:
            # "email=alice@example.com": a key no address, "ip:" or "user:"
            # key can equal, so a fail2ban ban of what a client typed can
            # never ban an address or a user
            value = body_field(request, name)
            if isinstance(value, list):  # a repeated field: the value Django serves
                value = value[-1]
            found = identity(value) if isinstance(value, str) else None
            return None if found is None else f"{name}={found}"

        return _kind(person, "plain", f"identity:{name}")
    return None
