"""``is_ratelimited`` and ``get_usage``: django-ratelimit's functions on
ratekeeper's gate.

A check is one throttle of the gate: its scope is the group (with the
methods, when limited to some: ``group:GET+POST``; with the rate, when a
callable gives it: ``group:5/60s``), its rules the rate (``5/m`` is
``5/60s``), its key the request's value of ``key``. The store
is the one ``RATELIMIT_USE_CACHE`` names: a Django Redis cache (Django's
``RedisCache`` or django-redis, or a subclass) is its Redis, a
local-memory cache the process's memory (a store of that cache's own,
whose counts the cache's ``clear()`` resets: see ``_generation``), a
dummy cache nothing (every count expires at once, as in
django-ratelimit). The settings read: ``RATELIMIT_ENABLE``,
``RATELIMIT_USE_CACHE``, ``RATELIMIT_CACHE_PREFIX`` (ratekeeper's prefix,
when set), ``RATELIMIT_FAIL_OPEN``, ``RATELIMIT_IP_META_KEY``,
``RATELIMIT_IPV4_MASK`` and ``RATELIMIT_IPV6_MASK``.
"""

import re
import threading
import uuid
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

from django.conf import settings
from django.core.cache import caches
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest
from django.utils.module_loading import import_string

from ratekeeper._ratekeeper import ConfigurationError, Decision, Gate, StorageError, TrustedProxies, scope_name
from ratekeeper.compat.django_ratelimit import ALL, UNSAFE

__all__ = ["ALL", "UNSAFE", "get_usage", "is_ratelimited", "get_header", "user_or_ip"]

Rate = Union[str, Tuple[int, int]]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_RATE = re.compile(r"^(\d+)/(\d*)([smhd]?)$")
# the gates made so far, by (store, scope, rules); a callable rate may give
# any rate, so the table is emptied when it is full
_GATES: Dict[Tuple[Any, ...], Gate] = {}
_BASES: Dict[Tuple[Any, ...], Gate] = {}
_MAX_GATES = 1024
_LOCK = threading.Lock()
_REDIS_BACKENDS = ("django.core.cache.backends.redis.RedisCache", "django_redis.cache.RedisCache")
_MEMORY_BACKENDS = ("django.core.cache.backends.locmem.LocMemCache",)
_DUMMY_BACKENDS = ("django.core.cache.backends.dummy.DummyCache",)
# the entry a local-memory cache holds beside its own, whose loss (the
# cache's clear()) resets the counts kept for it; and the generation last
# seen, by cache name and LOCATION (the cache's entries are LOCATION's)
_GENERATION_KEY = "ratekeeper.compat.django_ratelimit.generation"
_GENERATIONS: Dict[Tuple[str, str], str] = {}


def _split_rate(rate: Rate) -> Tuple[int, int]:
    """``(count, seconds)`` of a rate: ``"5/m"``, ``"100/10s"``, ``"100/10"``
    (seconds), or such a tuple already."""
    if isinstance(rate, tuple):
        return rate
    found = _RATE.match(str(rate).strip())
    if found is None:
        raise ImproperlyConfigured(f"invalid rate {rate!r}: give COUNT/PERIOD, as '5/m', '100/10s' or '100/10'")
    count, multiplier, unit = found.groups()
    return int(count), int(multiplier or 1) * _UNITS[unit or "s"]


def _get_ip(request: HttpRequest) -> str:
    """The client's address: ``REMOTE_ADDR``, or where ``RATELIMIT_IP_META_KEY``
    says (a ``META`` key, or a callable's dotted path or the callable)."""
    where = getattr(settings, "RATELIMIT_IP_META_KEY", None)
    if not where:
        ip = request.META.get("REMOTE_ADDR")
    elif callable(where):
        ip = where(request)
    elif "." in where:
        ip = import_string(where)(request)
    elif where in request.META:
        ip = request.META[where]
    else:
        raise ImproperlyConfigured(f"RATELIMIT_IP_META_KEY: the request has no META[{where!r}]")
    if not ip:
        raise ImproperlyConfigured("the request has no client address (empty REMOTE_ADDR): set RATELIMIT_IP_META_KEY "
                                   "to where the proxy in front gives it")
    return str(ip)


def _ip_key(request: HttpRequest) -> str:
    """The client as the key ``ip`` names it: its network by ``RATELIMIT_IPV4_MASK``
    (default 32) and ``RATELIMIT_IPV6_MASK`` (default 64)."""
    try:
        proxies = TrustedProxies([], ipv4_prefix=getattr(settings, "RATELIMIT_IPV4_MASK", 32),
                                 ipv6_prefix=getattr(settings, "RATELIMIT_IPV6_MASK", 64))
    except ConfigurationError as exc:
        raise ImproperlyConfigured(f"RATELIMIT_IPV4_MASK / RATELIMIT_IPV6_MASK: {exc}") from None
    return proxies.client_key(_get_ip(request), None)


def _user_id(request: HttpRequest) -> Optional[str]:
    user = getattr(request, "user", None)
    return str(user.pk) if user is not None and user.is_authenticated else None


def user_or_ip(request: HttpRequest) -> str:
    """``user:ID`` for a signed-in user, else ``ip:CLIENT`` (ratekeeper's ``user`` key)."""
    found = _user_id(request)
    return f"user:{found}" if found is not None else f"ip:{_ip_key(request)}"


def get_header(request: HttpRequest, header: str) -> str:
    """A header's value as it came ('' when absent)."""
    return str(request.META.get("HTTP_" + header.upper().replace("-", "_"), ""))


_KEYS: Dict[str, Callable[[HttpRequest], Any]] = {
    "ip": _ip_key,
    "user": user_or_ip,
    "user_or_ip": user_or_ip,
}


def _key_value(group: str, key: Any, request: HttpRequest) -> Any:
    """The request's value of ``key`` (empty or None: not limited)."""
    if callable(key):
        return key(group, request)
    if not isinstance(key, str) or not key:
        raise ImproperlyConfigured(f"ratelimit: invalid key {key!r}: give 'ip', 'user', 'user_or_ip', "
                                   "'header:NAME', 'get:FIELD', 'post:FIELD', a dotted path or a callable")
    if key in _KEYS:
        return _KEYS[key](request)
    kind, _, name = key.partition(":")
    if name and kind == "header":
        return get_header(request, name)
    if name and kind == "get":
        return request.GET.get(name, "")
    if name and kind == "post":
        return request.POST.get(name, "")
    if "." in key:
        return import_string(key)(group, request)
    raise ImproperlyConfigured(f"ratelimit: unknown key {key!r}")


def _rate_of(group: str, rate: Any, request: HttpRequest) -> Optional[Tuple[int, int]]:
    """The rate that applies to the request (None: unlimited)."""
    if callable(rate):
        rate = rate(group, request)
    elif isinstance(rate, str) and "." in rate and "/" not in rate:
        rate = import_string(rate)(group, request)
    return None if rate is None else _split_rate(rate)


def _methods(method: Any) -> Optional[Tuple[str, ...]]:
    if method is ALL:
        return None
    if isinstance(method, str):
        method = (method,)
    return tuple(sorted({m.upper() for m in method}))


def _backend(cache: Any) -> str:
    """The dotted path of the known backend the cache is, or derives from
    (an app's subclass of Django's RedisCache is a Redis cache); '' for none."""
    for klass in type(cache).__mro__:
        path = f"{klass.__module__}.{klass.__qualname__}"
        if path in _REDIS_BACKENDS + _MEMORY_BACKENDS + _DUMMY_BACKENDS:
            return path
    return ""


def _store() -> Tuple[str, Optional[Dict[str, Any]]]:
    """The name of the cache ``RATELIMIT_USE_CACHE`` names, and that cache as
    ratekeeper's ``[store]`` (None: a dummy cache, which keeps nothing)."""
    name = getattr(settings, "RATELIMIT_USE_CACHE", "default")
    backend = _backend(caches[name])  # caches[] raises InvalidCacheBackendError, naming it, when there is none
    conf = settings.CACHES[name]
    if backend in _DUMMY_BACKENDS:
        return name, None
    if backend in _REDIS_BACKENDS:
        location = conf.get("LOCATION")
        first = location[0] if isinstance(location, (list, tuple)) else str(location or "")
        url = re.split(r"[,;]", first)[0].strip()
    elif backend in _MEMORY_BACKENDS:
        url = "memory://"
    else:
        raise ImproperlyConfigured(f"RATELIMIT_USE_CACHE: the cache {name!r} ({conf.get('BACKEND')}) cannot hold "
                                   "exact windows: use a Redis cache (Django's RedisCache or django-redis), a "
                                   "local-memory one, or a dummy one (nothing limited)")
    store: Dict[str, Any] = {"url": url, "on_error": "raise", "denial_cache": 0}
    prefix = getattr(settings, "RATELIMIT_CACHE_PREFIX", None)
    if prefix:
        store["prefix"] = prefix
    return name, store


def _generation(name: str) -> str:
    """The generation of the counts kept for the local-memory cache ``name``:
    a token the cache holds (``_GENERATION_KEY``) beside its own entries.

    django-ratelimit's counts are entries of the cache, so the cache's
    ``clear()`` (an app's test ``setUp``) resets them; ratekeeper's are in a
    memory store of the cache's own, which this mirrors: once the token is
    gone (cleared, or culled past ``MAX_ENTRIES`` as the counts it stands
    for would be), the next check starts a new one, and with it a new,
    empty, memory store. The stores of earlier generations are dropped."""
    cache = caches[name]
    token = cache.get(_GENERATION_KEY)
    if token is None:
        new = uuid.uuid4().hex
        cache.add(_GENERATION_KEY, new, None)  # the first of concurrent checks sets it
        token = cache.get(_GENERATION_KEY, new)
    where = (name, str(settings.CACHES[name].get("LOCATION", "")))
    with _LOCK:
        last = _GENERATIONS.get(where)
        if last != token:
            _GENERATIONS[where] = token
            for table in (_GATES, _BASES):
                for key in [k for k in table if k[0] == name and k[2] == last]:
                    del table[key]
    return str(token)


def _gate(name: str, store: Dict[str, Any], scope: str, rules: str) -> Gate:
    """The gate of one check, on the store of the cache ``name`` (``_store``)."""
    generation = _generation(name) if store["url"] == "memory://" else ""
    key = (name, tuple(sorted(store.items())), generation, scope, rules)
    with _LOCK:
        gate = _GATES.get(key)
    if gate is not None:
        return gate
    try:
        with _LOCK:  # one base, and so one memory store, per cache and generation
            base = _BASES.get(key[:3])
            if base is None:
                base = _BASES[key[:3]] = Gate({"store": store})
        gate = base.with_policy({"throttle": [{"scope": scope, "rules": rules, "key": _given_key}]})
    except ConfigurationError as exc:
        raise ImproperlyConfigured(f"ratelimit: {exc}") from None
    with _LOCK:
        if len(_GATES) >= _MAX_GATES:
            _GATES.clear()
        _GATES[key] = gate
    return gate


def _given_key(context: Tuple[HttpRequest, bytes]) -> bytes:
    """The key the check computed (the gate's callable)."""
    return context[1]


def _encoded(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def get_usage(
    request: HttpRequest,
    group: Optional[str] = None,
    fn: Optional[Callable[..., Any]] = None,
    key: Any = None,
    rate: Any = None,
    method: Union[None, str, Sequence[str]] = ALL,
    increment: bool = False,
) -> Optional[Dict[str, Any]]:
    """The request's usage of ``rate`` per ``key`` within ``group`` (by
    default ``fn``'s dotted name): ``count`` (what the window holds, the
    request with it when counted and refused), ``limit``, ``time_left``
    (seconds until the window frees a unit), ``should_limit`` and
    ratekeeper's ``decision``. ``increment`` counts the request; without it
    the window is only read (``should_limit``: the next request would be
    refused). None when the request is not limited: the method does not
    apply, the rate is None, or the key is empty.

    A store that cannot answer: a counted request is limited (or not, with
    ``RATELIMIT_FAIL_OPEN``); a read counts nothing and is not limited, as
    django-ratelimit reads a failing cache. A dummy cache keeps nothing:
    ``count`` is the request alone (1 counted, 0 read), limited only above
    the rate (``0/m``)."""
    if group is None and fn is None:
        raise ImproperlyConfigured("get_usage needs a group or a function (fn)")
    if key is None:
        raise ImproperlyConfigured("ratelimit: give a key ('ip', 'user', 'header:NAME', ... or a callable)")
    if not getattr(settings, "RATELIMIT_ENABLE", True):
        return None
    if group is None:
        group = f"{fn.__module__}.{getattr(fn, '__qualname__', getattr(fn, '__name__', 'view'))}"
    methods = _methods(method)
    if methods is not None and (request.method or "GET").upper() not in methods:
        return None
    found = _rate_of(group, rate, request)
    if found is None:
        return None
    limit, period = found
    value = _key_value(group, key, request)
    if value is None or value == "" or value == b"":
        return None
    name, store = _store()
    if store is None:  # a dummy cache: every count expires at once
        count = int(increment)
        return {"count": count, "limit": limit, "should_limit": count > limit, "time_left": period, "decision": None}
    if limit == 0:
        return {"count": int(increment), "limit": 0, "should_limit": True, "time_left": period, "decision": None}
    parts = [group] if methods is None else [group, "+".join(methods)]
    if not isinstance(rate, (str, tuple)) or "/" not in str(rate):
        parts.append(f"{limit}/{period}s")  # a rate a callable gives: a log of its own
    scope = scope_name(":".join(parts))
    gate = _gate(name, store, scope, f"{limit}/{period}s")
    key_bytes = _encoded(value)
    try:
        return _usage(gate, request, key_bytes, limit, increment)
    except StorageError:
        if not increment:  # a read that fails counts nothing
            return {"count": 0, "limit": limit, "should_limit": False, "time_left": period, "decision": None}
        if getattr(settings, "RATELIMIT_FAIL_OPEN", False):
            return None
        return {"count": 0, "limit": limit, "should_limit": True, "time_left": period, "decision": None}


def _usage(gate: Gate, request: HttpRequest, key: bytes, limit: int, increment: bool) -> Dict[str, Any]:
    meta = request.META
    try:  # the address the listed addresses are matched against
        peer = _get_ip(request)
    except ImproperlyConfigured:  # only a key of kind ip needs one
        peer = ""
    if increment:
        verdict = gate.decide(request.method or "GET", request.path_info, meta.get("HTTP_HOST") or "", peer, meta,
                              meta.get("QUERY_STRING", ""), context=(request, key))
        decision: Optional[Decision] = verdict.decision
        limited = verdict.ending != "pass"
    else:
        (limiter,) = gate.limiters().values()
        decision = limiter.peek(key, ip=peer or None)
        limited = not decision.allowed
    if decision is None:
        return {"count": 0, "limit": limit, "should_limit": limited, "time_left": 0, "decision": None}
    used = limit - decision.remaining
    refused = increment and limited
    wait = decision.reset_after if decision.allowed else (decision.retry_after or decision.reset_after)
    return {"count": used + int(refused), "limit": limit, "should_limit": limited, "time_left": wait,
            "decision": decision}


def is_ratelimited(
    request: HttpRequest,
    group: Optional[str] = None,
    fn: Optional[Callable[..., Any]] = None,
    key: Any = None,
    rate: Any = None,
    method: Union[None, str, Sequence[str]] = ALL,
    increment: bool = False,
) -> bool:
    """Whether the request is over ``rate`` per ``key`` within ``group``
    (see ``get_usage``; ``increment`` counts it)."""
    usage = get_usage(request, group, fn, key, rate, method, increment)
    return bool(usage and usage["should_limit"])


is_ratelimited.ALL = ALL  # type: ignore[attr-defined]
is_ratelimited.UNSAFE = UNSAFE  # type: ignore[attr-defined]
get_usage.ALL = ALL  # type: ignore[attr-defined]
get_usage.UNSAFE = UNSAFE  # type: ignore[attr-defined]
