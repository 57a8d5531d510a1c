r"""``settings.RATEKEEPER``: read, validated, and turned into limiters.

    RATEKEEPER = {
        "STORE": "redis://127.0.0.1:6379/0",   # default "memory://"
        "RULES": "10/second; 100/minute",      # every request not matched below
        "KEY": "ip",                           # see ratekeeper.django.keys
        "PATHS": [{"path": "/api/", "rules": "5/second", "key": "header:X-Api-Key", "methods": ["POST"]}],
        "VIEWS": {"shop.views.checkout": "3/minute"},   # dotted view path or URL name
        "TIERS": {"free": "100/hour", "pro": "10000/hour"},   # for RULES; a tier stored per key wins
        "TIER": "myapp.limits.tier_of",        # callable(request) -> tier name or None
        "FAIL2BAN": [{"name": "scanners", "paths": [r"\.php$", r"^/\.env", r"^/\.git"],
                      "maxretry": 3, "findtime": 600, "bantime": 86400}],    # the bad request gets 403
        "ALLOW2BAN": [{"name": "logins", "paths": ["^/login"], "methods": ["POST"],
                       "maxretry": 20, "findtime": 60, "bantime": 3600}],  # let through until the ban
        "BLOCKED_STATUS": 403, "CONTROLS_REFRESH": 2.0,
        "HEADERS": "all",                      # rate-limit headers: "all", "draft", "legacy" or "none"
        "EXEMPT_PATHS": ["/health", "/static/"],
        "TRUSTED_PROXIES": ["10.0.0.0/8"],
        "ON_ERROR": "allow", "TIMEOUT": 0.25, "CONNECT_TIMEOUT": 0.25, "PREFIX": "rk",
        "STATUS": 429, "RESPONDER": None, "RAISE": False, "ENABLED": True,
        "LOG_LEVEL": "INFO",                   # one line per denial on "ratekeeper.denials"; None: off
        "LOG_KEYS": False,                     # log keys as they are, not hashed
    }

Or every door's policy file (TOML, as the edge server, the Rack middleware
and the WSGI and ASGI middlewares read it; the store is the file's):

    RATEKEEPER = {"POLICY_FILE": BASE_DIR / "policy.toml"}

The settings build that same policy, and the core's gate decides each
request: every entry that applies counts it (PATHS entries, longest prefix
first, then VIEWS entries, then RULES with the request's tier), each in one
round trip, and the first denial in that order answers. Blocklisted and
safelisted keys, addresses and ranges (``ratekeeper`` command, ``manage.py
ratekeeper``, ``ratekeeper.Admin``) apply to every request; FAIL2BAN and
ALLOW2BAN ban the client IP.
"""

import contextlib
import logging
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from django.conf import settings
from django.core.signals import setting_changed
from django.http import HttpRequest
from django.utils.module_loading import import_string

from ratekeeper._ratekeeper import (
    ConfigurationError,
    Fail2Ban,
    Gate,
    Limiter,
    Responses,
    TrustedProxies,
    check_option,
    parse_rules,
    scope_name,
)
from ratekeeper.django.keys import KeyFunc, key_function, kind_of

KNOWN = {
    "ENABLED", "STORE", "PREFIX", "ON_ERROR", "TIMEOUT", "CONNECT_TIMEOUT", "POOL_SIZE", "MAX_KEYS",
    "RULES", "KEY", "PATHS", "VIEWS", "TIERS", "TIER", "EXEMPT_PATHS", "TRUSTED_PROXIES",
    "STATUS", "RESPONDER", "RAISE", "LOG_LEVEL", "LOG_KEYS", "FAIL2BAN", "ALLOW2BAN", "BLOCKED_STATUS",
    "CONTROLS_REFRESH", "SCOPE", "HEADERS", "DENIAL_CACHE", "CONTROLS", "REDIS_MODULE", "IPV4_PREFIX", "IPV6_PREFIX",
    "POLICY_FILE", "POLICY_REFRESH", "POLICIES",
}
# What a policy file says instead, when POLICY_FILE is given.
POLICY_SETTINGS = KNOWN - {"POLICY_FILE", "RESPONDER", "RAISE", "LOG_LEVEL"}
# The settings that are Limiter options (each checked by the core, named here).
LIMITER_OPTIONS = {
    "STORE": "store", "PREFIX": "prefix", "ON_ERROR": "on_error", "TIMEOUT": "timeout",
    "CONNECT_TIMEOUT": "connect_timeout", "POOL_SIZE": "pool_size", "MAX_KEYS": "max_keys",
    "CONTROLS_REFRESH": "controls_refresh", "DENIAL_CACHE": "denial_cache", "CONTROLS": "controls",
    "REDIS_MODULE": "redis_module",
    # the old names of CONTROLS_REFRESH and CONTROLS: still read, with a DeprecationWarning
    "POLICY_REFRESH": "policy_refresh", "POLICIES": "policies",
}
BAN_FIELDS = {"name", "paths", "methods", "maxretry", "findtime", "bantime"}

# The system check id of each kind of problem (see SettingError).
CHECK_IDS = {
    "settings": "ratekeeper.E001",  # RATEKEEPER itself: not a dict, unknown names
    "store": "ratekeeper.E002",  # STORE and its options
    "rules": "ratekeeper.E003",  # RULES, TIERS, PATHS, VIEWS
    "requests": "ratekeeper.E004",  # KEY, TIER, TRUSTED_PROXIES, EXEMPT_PATHS
    "responses": "ratekeeper.E005",  # STATUS, BLOCKED_STATUS, HEADERS, RESPONDER, LOG_LEVEL
    "bans": "ratekeeper.E006",  # FAIL2BAN, ALLOW2BAN
}


class SettingError(ConfigurationError):
    """A bad value in settings.RATEKEEPER: the message starts with the
    setting (``RATEKEEPER['PATHS'][0]: ...``); ``check_id`` names its kind."""

    def __init__(self, message: str, check_id: str) -> None:
        super().__init__(message)
        self.check_id = check_id


@contextlib.contextmanager
def _setting(name: str, kind: str) -> Iterator[None]:
    """Names the setting `name` in any configuration error raised inside."""
    try:
        yield
    except SettingError:
        raise
    except (ConfigurationError, TypeError, ValueError, OverflowError) as exc:
        text = str(exc)
        shown = text if text.startswith(name) else f"{name}: {text}"
        raise SettingError(shown, CHECK_IDS[kind]) from None


@dataclass
class Policy:
    """One rule set with the key it counts by, the scope that keeps its logs
    apart, and the methods it applies to: a throttle of the gate."""

    scope: str
    rules: Any
    key: KeyFunc
    methods: Optional[frozenset] = None
    # shadow mode for this throttle alone: True counts, logs and reports
    # what it would deny and lets it through (the core checks the value)
    shadow: Any = None
    # the responses it counts: "failures" or a list of statuses (the core
    # checks the value); None: every request
    count: Any = None


@dataclass
class Ban:
    """A FAIL2BAN or ALLOW2BAN entry, by the core's `rule` (checked when built)."""

    name: str
    paths: List[str]
    methods: Optional[frozenset]
    rule: Fail2Ban
    allow: bool


def _rules_text(rules: Any) -> str:
    """Rules as a policy writes them."""
    return rules if isinstance(rules, str) else "; ".join(str(r) for r in parse_rules(rules))


def policy_key(func: KeyFunc) -> Any:
    """A key function as a policy names it: the core reads the client, a
    header or a query field itself; any other is the callable."""
    return getattr(func, "ratekeeper_source", None) or func


def _view_names(request: HttpRequest) -> Tuple[str, ...]:
    """The URL name and dotted path of the view the request resolves to (once per request)."""
    names = getattr(request, "_ratekeeper_view", None)
    if names is None:
        from django.urls import Resolver404, resolve

        try:
            match = resolve(request.path_info)
            names = (match.view_name, match._func_path)
        except Resolver404:
            names = ()
        request._ratekeeper_view = names  # type: ignore[attr-defined]
    return names  # type: ignore[no-any-return]


@dataclass
class Config:
    """The validated settings, and the gate they build."""

    enabled: bool = True
    # the [store] table of the settings' policy: the URL and the limiter options given
    store: Dict[str, Any] = field(default_factory=dict)
    proxies: TrustedProxies = field(default_factory=TrustedProxies)
    default: Optional[Policy] = None
    paths: List[Tuple[str, Policy]] = field(default_factory=list)
    views: Dict[str, Policy] = field(default_factory=dict)
    tiers: Dict[str, Any] = field(default_factory=dict)
    tier: Optional[Callable[[HttpRequest], Optional[str]]] = None
    exempt: Tuple[str, ...] = ()
    responses: Responses = field(default_factory=Responses)
    answers: Dict[str, Any] = field(default_factory=dict)
    responder: Optional[Callable[..., Any]] = None
    raise_exception: bool = False
    default_key: Any = "ip"
    log_level: Any = "INFO"
    bans: List[Ban] = field(default_factory=list)
    gate: Optional[Gate] = None
    # whether an async request reads the user first (a key reads it), or is
    # decided in a thread (a callable of the application's own may touch the database)
    reads_user: bool = False
    needs_thread: bool = False
    _gates: List[Gate] = field(default_factory=list)
    # the decorators' gates: (reads_user, needs_thread) by id
    _view_flags: Dict[int, Tuple[bool, bool]] = field(default_factory=dict)

    def flags(self, gate: Gate) -> Tuple[bool, bool]:
        """Whether an async request to `gate` reads the user first, and
        whether it is decided in a thread."""
        return self._view_flags.get(id(gate), (self.reads_user, self.needs_thread))

    def limiters(self) -> Dict[str, Limiter]:
        """Every throttle's limiter, of these settings and the decorators, by scope."""
        out: Dict[str, Limiter] = {}
        for gate in [self.gate, *self._gates]:
            if gate is not None:
                out.update(gate.limiters())
        return out

    def throttle_rules(self) -> Dict[str, str]:
        """The rules of each log these settings' and the decorators'
        throttles keep a key's usage in, by scope (a throttle with meters:
        each meter's, ``scope@meter``), as ``Admin.usage`` takes them."""
        out: Dict[str, str] = {}
        for gate in [self.gate, *self._gates]:
            if gate is not None:
                out.update(gate.throttle_rules())
        return out

    def view_gate(self, scope: str, rules: Any, key: Any, methods: Optional[frozenset], count: Any = None) -> Gate:
        """The gate of one decorated view (its own throttle, on the configured
        store; ``count``, the responses it counts, checked by the core)."""
        assert self.gate is not None
        func = key_function(key, self.proxies)
        throttle: Dict[str, Any] = {"scope": scope_name(scope), "rules": _rules_text(rules), "key": policy_key(func)}
        if methods is not None:
            throttle["methods"] = sorted(methods)
        if count is not None:
            throttle["count"] = count
        gate = self.gate.with_policy({**self.answers, "throttle": [throttle]})
        self._gates.append(gate)
        kind = "plain" if getattr(func, "ratekeeper_source", None) else kind_of(func)
        self._view_flags[id(gate)] = (kind == "user", kind == "custom")
        return gate

    def policy(
        self, scope: str, rules: Any, key: Any, methods: Any = None, tiers: Any = None, named: bool = True,
        shadow: Any = None, count: Any = None,
    ) -> Policy:
        """A policy from raw setting values; raises ConfigurationError naming
        the scope (unless `named` is False: the caller names the setting)."""
        try:
            check_option("scope", scope_name(scope))
            if rules is None:
                raise ConfigurationError("give rules, as '5/second; 100/minute'")
            parse_rules(rules)
        except (ConfigurationError, TypeError) as exc:
            raise ConfigurationError(f"{scope}: {exc}" if named else str(exc)) from None
        key_func = key_function(self.default_key if key is None else key, self.proxies)
        return Policy(scope, rules, key_func, _methods(scope, methods), shadow, count)

    def is_exempt(self, path: str) -> bool:
        """Whether the path starts with one of EXEMPT_PATHS."""
        return any(path.startswith(prefix) for prefix in self.exempt)

    def throttles(self) -> List[Dict[str, Any]]:
        """The settings' throttles, in the order their denials answer:
        PATHS (longest prefix first), VIEWS, RULES."""
        def entry(policy: Policy, **more: Any) -> Dict[str, Any]:
            out = {"scope": scope_name(policy.scope), "rules": _rules_text(policy.rules),
                   "key": policy_key(policy.key), **more}
            if policy.methods is not None:
                out["methods"] = sorted(policy.methods)
            if policy.shadow is not None:
                out["shadow"] = policy.shadow
            if policy.count is not None:
                out["count"] = policy.count
            return out

        out = [entry(policy, paths=[prefix]) for prefix, policy in self.paths]
        for name, policy in self.views.items():
            out.append(entry(policy, match=lambda request, name=name: name in _view_names(request) or None))
        if self.default is not None:
            more: Dict[str, Any] = {}
            if self.tiers:
                more["tiers"] = {name: _rules_text(rules) for name, rules in self.tiers.items()}
                if self.tier is not None:
                    more["tier"] = self.tier
            out.append(entry(self.default, **more))
        return out


def _scope(value: Any) -> str:
    """A scope named in the settings: the name a Rack throttle (or any limiter
    with this scope) uses for the same quota."""
    check_option("scope", value)
    if not value:
        raise ConfigurationError("the scope must not be empty: give a name such as 'api'")
    return str(value)


def _methods(scope: str, methods: Any) -> Optional[frozenset]:
    """The methods an entry names (one, or a list), as the core compares
    them; the core checks each when it builds the gate, as it does for Rack
    and the edge server (any HTTP token, WebDAV's PROPFIND as much as GET)."""
    if methods is None:
        return None
    if isinstance(methods, str):
        methods = [methods]
    if not isinstance(methods, (list, tuple, set, frozenset)):
        raise ConfigurationError(f"{scope}: methods must be a method or a list of methods, not {type(methods).__name__}")
    return frozenset(str(m).upper() for m in methods)


def _callable(name: str, value: Any) -> Optional[Callable[..., Any]]:
    if value is None or callable(value):
        return value
    if isinstance(value, str):
        try:
            found = import_string(value)
        except ImportError as exc:
            raise ConfigurationError(f"RATEKEEPER['{name}']: cannot import {value!r} ({exc})") from None
        if callable(found):
            return found  # type: ignore[no-any-return]
    raise ConfigurationError(f"RATEKEEPER['{name}'] must be a callable or its dotted path, not {value!r}")


def _strings(name: str, value: Any) -> Sequence[str]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ConfigurationError(f"RATEKEEPER['{name}'] must be a list of strings, not {value!r}")
    return value


def build(raw: Any) -> Config:
    """Validates the raw settings dict and builds the limiters (no store is
    called); raises SettingError (a ConfigurationError, a ValueError) naming
    the first bad setting."""
    if raw is None:
        raw = {}
    with _setting("RATEKEEPER", "settings"):
        if not isinstance(raw, dict):
            raise ConfigurationError(f"must be a dict, not {type(raw).__name__}")
        unknown = sorted(set(raw) - KNOWN)
        if unknown:
            raise ConfigurationError(f"unknown setting(s) {unknown}; known: {sorted(KNOWN)}")
    if raw.get("POLICY_FILE") is not None:
        return _from_file(raw)
    cfg = Config()
    cfg.enabled = bool(raw.get("ENABLED", True))
    with _setting("RATEKEEPER['TRUSTED_PROXIES']", "requests"):
        proxies = list(_strings("TRUSTED_PROXIES", raw.get("TRUSTED_PROXIES", [])))
        cfg.proxies = TrustedProxies(proxies)
    prefixes: Dict[str, Any] = {}
    for name in ("IPV4_PREFIX", "IPV6_PREFIX"):  # checked one by one, so an error names its setting
        with _setting(f"RATEKEEPER['{name}']", "requests"):
            if isinstance(raw.get(name), bool):
                raise ConfigurationError(f"must be a prefix length, not {raw[name]!r}")
            prefixes[name.lower()] = raw.get(name)
            cfg.proxies = TrustedProxies(proxies, **prefixes)
    with _setting("RATEKEEPER['EXEMPT_PATHS']", "requests"):
        cfg.exempt = tuple(_strings("EXEMPT_PATHS", raw.get("EXEMPT_PATHS", [])))
    answers: Dict[str, Any] = {"log_keys": bool(raw.get("LOG_KEYS", False))}
    for name, option in (("STATUS", "status"), ("BLOCKED_STATUS", "blocked_status"), ("HEADERS", "headers")):
        with _setting(f"RATEKEEPER['{name}']", "responses"):
            value = raw.get(name)
            if option != "headers" and isinstance(value, bool):
                raise ConfigurationError(f"must be an HTTP error status (400-599), not {value!r}")
            answers[option] = value
            cfg.responses = Responses(**answers)
    _door_settings(cfg, raw)
    cfg.answers = {**answers, "trusted_proxies": proxies, **prefixes, "log_denials": cfg.log_level is not None}
    with _setting("RATEKEEPER['TIER']", "requests"):
        cfg.tier = _callable("TIER", raw.get("TIER"))
    cfg.default_key = raw.get("KEY", "ip")
    with _setting("RATEKEEPER['KEY']", "requests"):
        key_function(cfg.default_key, cfg.proxies)  # validate early
    for name, option in LIMITER_OPTIONS.items():  # each alone, so that an error names its setting
        if raw.get(name) is not None:
            with _setting(f"RATEKEEPER['{name}']", "store"):
                check_option(option, raw[name])
            cfg.store["url" if option == "store" else option] = raw[name]
    tiers = raw.get("TIERS", {})
    with _setting("RATEKEEPER['TIERS']", "rules"):
        if not isinstance(tiers, dict):
            raise ConfigurationError("must be a dict of tier name to rules")
        cfg.tiers = {str(name): rules for name, rules in tiers.items()}
        for name, rules in cfg.tiers.items():
            with _setting(f"RATEKEEPER['TIERS'][{name!r}]", "rules"):
                parse_rules(rules)
        if raw.get("RULES") is None and tiers:
            raise ConfigurationError("is set but RATEKEEPER['RULES'] (the rules of requests with no tier) is not")
    with _setting("RATEKEEPER['SCOPE']", "rules"):
        default_scope = _scope(raw.get("SCOPE", "default"))
    if raw.get("RULES") is not None:
        with _setting("RATEKEEPER['RULES']", "rules"):
            cfg.default = cfg.policy(default_scope, raw["RULES"], None, tiers=cfg.tiers, named=False)
    for setting, allow in (("FAIL2BAN", False), ("ALLOW2BAN", True)):
        entries = raw.get(setting, [])
        with _setting(f"RATEKEEPER['{setting}']", "bans"):
            if not isinstance(entries, (list, tuple)):
                raise ConfigurationError("must be a list of dicts")
        for i, entry in enumerate(entries):
            with _setting(f"RATEKEEPER['{setting}'][{i}]", "bans"):
                cfg.bans.append(_ban(f"RATEKEEPER['{setting}'][{i}]", entry, allow))
    paths = raw.get("PATHS", [])
    with _setting("RATEKEEPER['PATHS']", "rules"):
        if not isinstance(paths, (list, tuple)):
            raise ConfigurationError("must be a list of dicts with 'path' and 'rules'")
    for i, entry in enumerate(paths):
        scope = f"RATEKEEPER['PATHS'][{i}]"
        with _setting(scope, "rules"):
            if not isinstance(entry, dict) or not isinstance(entry.get("path"), str) or "rules" not in entry:
                raise ConfigurationError("must be a dict with 'path' (str) and 'rules'")
            extra = set(entry) - {"path", "rules", "key", "methods", "scope", "shadow", "count"}
            if extra:
                raise ConfigurationError(f"has unknown field(s) {sorted(extra)}")
            scope = _scope(entry["scope"]) if "scope" in entry else f"path:{entry['path']}"
            policy = cfg.policy(scope, entry["rules"], entry.get("key"), entry.get("methods"), named=False,
                                shadow=entry.get("shadow"), count=entry.get("count"))
        cfg.paths.append((entry["path"], policy))
    cfg.paths.sort(key=lambda item: -len(item[0]))
    views = raw.get("VIEWS", {})
    with _setting("RATEKEEPER['VIEWS']", "rules"):
        if not isinstance(views, dict):
            raise ConfigurationError("must be a dict of view name to rules")
    for name, spec in views.items():
        scope = f"view:{name}"
        with _setting(f"RATEKEEPER['VIEWS'][{name!r}]", "rules"):
            if isinstance(spec, dict):
                scope = _scope(spec["scope"]) if "scope" in spec else scope
                policy = cfg.policy(scope, spec.get("rules"), spec.get("key"), spec.get("methods"), named=False,
                                    shadow=spec.get("shadow"), count=spec.get("count"))
            else:
                policy = cfg.policy(scope, spec, None, named=False)
        cfg.views[name] = policy
    with _setting("RATEKEEPER", "rules"):
        cfg.gate = _gate(cfg)
    return cfg


def _gate(cfg: Config) -> Gate:
    """The gate of the settings: their throttles, bans and answers on the
    configured store."""
    policies = [p for _, p in cfg.paths] + list(cfg.views.values()) + ([cfg.default] if cfg.default else [])
    kinds = {kind_of(p.key) for p in policies if not getattr(p.key, "ratekeeper_source", None)}
    cfg.reads_user = "user" in kinds
    cfg.needs_thread = "custom" in kinds or (cfg.tier is not None and bool(cfg.tiers))
    bans: Dict[str, List[Dict[str, Any]]] = {"fail2ban": [], "allow2ban": []}
    for ban in cfg.bans:
        entry = {"name": ban.rule.name, "paths": ban.paths, "maxretry": ban.rule.maxretry,
                 "findtime": ban.rule.findtime, "bantime": ban.rule.bantime}
        if ban.methods is not None:
            entry["methods"] = sorted(ban.methods)
        bans["allow2ban" if ban.allow else "fail2ban"].append(entry)
    policy = {**cfg.answers, "store": cfg.store, "enabled": cfg.enabled, "exempt_paths": list(cfg.exempt),
              "throttle": cfg.throttles(), **bans}
    return Gate(policy)


def _from_file(raw: Dict[str, Any]) -> Config:
    """The config of POLICY_FILE: the file says the policy and the store;
    RESPONDER, RAISE and LOG_LEVEL still apply."""
    with _setting("RATEKEEPER['POLICY_FILE']", "settings"):
        given = sorted(set(raw) & POLICY_SETTINGS)
        if given:
            raise ConfigurationError(f"the policy file says {given}: give them there, not beside it")
        cfg = Config()
        cfg.gate = Gate(str(raw["POLICY_FILE"]))
        cfg.proxies = cfg.gate.trusted_proxies  # a decorator's key and gate name the file's client
        cfg.enabled = cfg.gate.enabled
        cfg.reads_user = True  # a key "user" reads the signed-in user
    _door_settings(cfg, raw)
    return cfg


def _door_settings(cfg: Config, raw: Dict[str, Any]) -> None:
    """RESPONDER, RAISE and LOG_LEVEL: how the Django door renders a verdict."""
    with _setting("RATEKEEPER['RESPONDER']", "responses"):
        cfg.responder = _callable("RESPONDER", raw.get("RESPONDER"))
    cfg.raise_exception = bool(raw.get("RAISE", False))
    cfg.log_level = raw.get("LOG_LEVEL", "INFO")
    with _setting("RATEKEEPER['LOG_LEVEL']", "responses"):
        if cfg.log_level is not None and not isinstance(logging.getLevelName(str(cfg.log_level).upper()), int):
            raise ConfigurationError(f"must be a logging level such as 'INFO', or None, not {cfg.log_level!r}")


def _ban(scope: str, entry: Any, allow: bool) -> Ban:
    """A FAIL2BAN/ALLOW2BAN entry, validated (the core checks the numbers)."""
    if not isinstance(entry, dict) or not {"name", "paths", "maxretry", "findtime", "bantime"} <= set(entry):
        raise ConfigurationError(f"{scope} must be a dict with 'name', 'paths', 'maxretry', 'findtime' and 'bantime'")
    extra = set(entry) - BAN_FIELDS
    if extra:
        raise ConfigurationError(f"{scope} has unknown field(s) {sorted(extra)}")
    raw_paths = entry["paths"]
    if isinstance(raw_paths, str) or not isinstance(raw_paths, (list, tuple)) or not all(isinstance(p, str) for p in raw_paths):
        raise ConfigurationError(f"{scope}['paths'] must be a list of regular expressions, not {raw_paths!r}")
    try:
        for pattern in raw_paths:
            re.compile(pattern)
    except re.error as exc:
        raise ConfigurationError(f"{scope}: bad path pattern ({exc})") from None
    try:  # the core checks the numbers and the name: fail at start-up, not per request
        rule = Fail2Ban(scope_name(str(entry["name"])), maxretry=entry["maxretry"], findtime=entry["findtime"],
                        bantime=entry["bantime"])
    except (ConfigurationError, TypeError, OverflowError) as exc:
        raise ConfigurationError(f"{scope}: {exc}") from None
    return Ban(str(entry["name"]), list(raw_paths), _methods(scope, entry.get("methods")), rule, allow)


_lock = threading.Lock()
_config: Optional[Config] = None


def get_config() -> Config:
    """The current settings, built once (again after ``override_settings``)."""
    global _config
    with _lock:
        if _config is None:
            _config = build(getattr(settings, "RATEKEEPER", None))
        return _config


def _reset(*, setting: str, **kwargs: Any) -> None:
    global _config
    if setting == "RATEKEEPER":
        with _lock:
            _config = None


setting_changed.connect(_reset)
