"""Type stubs of the native module (checked against it by tests/python/test_stubs.py)."""

from typing import Any, Awaitable, Callable, Coroutine, Dict, Iterable, List, Mapping, Optional, Tuple, TypeVar, Union, final

_F = TypeVar("_F", bound=Callable[..., Any])

__version__: str
DEFAULTS: Dict[str, Any]
CONSOLE_STYLE: str
"""The operations consoles' style sheet (the Django page's and Ratekeeper::Web's)."""
CONSOLE_CSP: str
"""The Content-Security-Policy of every response of the operations consoles (the Django page's and Ratekeeper::Web's)."""

def _panic_for_tests() -> None: ...
def _flush_denials_at_exit() -> None: ...
def _readable_length(content_length: Optional[str], transfer_encoding: Optional[str] = None) -> Optional[int]: ...
_MAX_BODY: int
def check_all(
    items: Iterable[
        Union[
            Tuple["Limiter", _KeyLike],
            Tuple["Limiter", _KeyLike, int],
            Tuple["Limiter", _KeyLike, int, Optional[str]],
        ]
    ],
    now: Optional[float] = None,
    *,
    ip: Optional[str] = None,
) -> List["Decision"]: ...
def acheck_all(
    items: Iterable[
        Union[
            Tuple["Limiter", _KeyLike],
            Tuple["Limiter", _KeyLike, int],
            Tuple["Limiter", _KeyLike, int, Optional[str]],
        ]
    ],
    now: Optional[float] = None,
    *,
    ip: Optional[str] = None,
) -> Coroutine[Any, Any, List["Decision"]]: ...
def parse_rules(rules: "_RulesLike") -> List["Rule"]: ...
def check_option(name: str, value: object) -> None: ...
def replay_log(
    path: str,
    rule_sets: List[_RulesLike],
    key: str,
    period_seconds: int,
    progress: Optional[Callable[[int, int, int], object]] = None,
) -> Dict[str, Any]: ...
def scope_name(name: str) -> str: ...
def flush_denials() -> None: ...

_KeyLike = Union[str, bytes]
_RuleLike = Union[str, "Rule", Tuple[int, float]]
_RulesLike = Union[str, "Rule", Iterable[_RuleLike]]
_MetersLike = Mapping[str, _RulesLike]
_CostLike = Union[int, Mapping[str, int]]

class RateKeeperError(Exception): ...
class ConfigurationError(RateKeeperError, ValueError): ...
class StorageError(RateKeeperError): ...

class RateLimitExceeded(RateKeeperError):
    decision: "Decision"

@final
class Rule:
    def __new__(cls, limit: Union[str, int], window: Optional[float] = None) -> "Rule": ...
    @property
    def limit(self) -> int: ...
    @property
    def window(self) -> float: ...
    @property
    def window_name(self) -> str: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class RuleState:
    @property
    def limit(self) -> int: ...
    @property
    def window(self) -> float: ...
    @property
    def remaining(self) -> int: ...
    @property
    def used(self) -> int: ...
    @property
    def reset_after(self) -> float: ...

@final
class Decision:
    @property
    def outcome(self) -> str: ...
    @property
    def allowed(self) -> bool: ...
    @property
    def retry_after(self) -> Optional[float]: ...
    @property
    def limit(self) -> int: ...
    @property
    def remaining(self) -> int: ...
    @property
    def reset_after(self) -> float: ...
    @property
    def window(self) -> float: ...
    @property
    def rules(self) -> List[RuleState]: ...
    @property
    def meters(self) -> Dict[str, List[RuleState]]: ...
    @property
    def meter(self) -> Optional[str]: ...
    @property
    def now(self) -> float: ...
    @property
    def degraded(self) -> bool: ...
    @property
    def cached(self) -> bool: ...
    @property
    def blocked(self) -> bool: ...
    @property
    def safelisted(self) -> bool: ...
    @property
    def reason(self) -> Optional[str]: ...
    @property
    def shadowed(self) -> bool: ...
    @property
    def tier(self) -> Optional[str]: ...
    @property
    def overridden(self) -> bool: ...
    def headers(self) -> Dict[str, str]: ...
    def to_dict(self) -> Dict[str, Any]: ...
    def __bool__(self) -> bool: ...

@final
class Fail2Ban:
    def __new__(
        cls,
        name: Optional[str] = None,
        *,
        maxretry: Optional[int] = None,
        findtime: Optional[float] = None,
        bantime: Optional[float] = None,
    ) -> "Fail2Ban": ...
    @property
    def name(self) -> str: ...
    @property
    def maxretry(self) -> int: ...
    @property
    def findtime(self) -> float: ...
    @property
    def bantime(self) -> float: ...

@final
class Answer:
    @property
    def status(self) -> Optional[int]: ...
    @property
    def headers(self) -> Dict[str, str]: ...
    @property
    def asgi_headers(self) -> List[Tuple[bytes, bytes]]: ...
    def asgi_send(self, send: Callable[[Dict[str, Any]], Awaitable[None]]) -> Callable[[Dict[str, Any]], Awaitable[None]]: ...
    @property
    def body(self) -> bytes: ...
    @property
    def passes(self) -> bool: ...

@final
class AsgiSend:
    def __call__(self, message: Dict[str, Any]) -> Awaitable[None]: ...

@final
class Verdict:
    @property
    def ending(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def shadow(self) -> Optional[str]: ...
    @property
    def answer(self) -> Answer: ...
    @property
    def decision(self) -> Optional["Decision"]: ...
    @property
    def scope(self) -> Optional[str]: ...
    @property
    def ban(self) -> Optional[str]: ...
    @property
    def banned(self) -> bool: ...
    @property
    def safelist(self) -> Optional[str]: ...
    @property
    def blocklist(self) -> Optional[str]: ...
    @property
    def log(self) -> Optional[Tuple[str, Dict[str, Any]]]: ...
    @property
    def checked(self) -> List[Tuple[str, bytes, "Decision"]]: ...
    @property
    def awaits_status(self) -> bool: ...
    def finish(self, status: int) -> None: ...
    def afinish(self, status: int) -> Coroutine[Any, Any, None]: ...

@final
class Gate:
    def __new__(cls, policy: Any, *, limiter: Optional["Limiter"] = None) -> "Gate": ...
    def check_unanswered(self) -> None: ...
    def decide(
        self,
        method: str,
        path: str,
        host: str,
        peer: str,
        headers: Any,
        query: str = "",
        *,
        context: Any = None,
        body: Optional[Callable[[str], Any]] = None,
        user: Optional[Callable[[], Any]] = None,
        cost: Optional[int] = None,
    ) -> Verdict: ...
    def adecide(
        self,
        method: str,
        path: str,
        host: str,
        peer: str,
        headers: Any,
        query: str = "",
        *,
        context: Any = None,
        body: Optional[Callable[[str], Any]] = None,
        user: Optional[Callable[[], Any]] = None,
        cost: Optional[int] = None,
    ) -> Coroutine[Any, Any, Verdict]: ...
    def decide_scope(
        self, scope: Dict[str, Any], *, body: Optional[Callable[[str], Any]] = None, cost: Optional[int] = None
    ) -> Verdict: ...
    def adecide_scope(
        self, scope: Dict[str, Any], *, body: Optional[Callable[[str], Any]] = None, cost: Optional[int] = None
    ) -> Coroutine[Any, Any, Verdict]: ...
    def penalize(self, name: str, peer: str, headers: Mapping[str, Any]) -> bool: ...
    @property
    def scopes(self) -> List[str]: ...
    def with_policy(self, policy: Dict[str, Any]) -> "Gate": ...
    def admin(self, *, actor: Optional[str] = None) -> "Admin": ...
    @property
    def stats(self) -> Dict[str, Dict[str, Any]]: ...
    @property
    def store_stats(self) -> Dict[str, Union[int, str]]: ...
    @property
    def trusted_proxies(self) -> TrustedProxies: ...
    @property
    def enabled(self) -> bool: ...
    @property
    def reads_body(self) -> bool: ...
    def limiters(self) -> Dict[str, "Limiter"]: ...

@final
class Responses:
    def __new__(
        cls,
        *,
        status: Optional[int] = None,
        blocked_status: Optional[int] = None,
        headers: Optional[str] = None,
        log_keys: bool = False,
    ) -> "Responses": ...
    @property
    def status(self) -> int: ...
    @property
    def blocked_status(self) -> int: ...
    @property
    def headers(self) -> str: ...
    @property
    def log_keys(self) -> bool: ...
    def answer(self, decision: Decision) -> Answer: ...
    def blocked(self) -> Answer: ...
    def pass_headers(self, decision: Decision) -> Dict[str, str]: ...
    def denial_headers(self, decision: Decision) -> Dict[str, str]: ...
    def denial_log(
        self, decision: Decision, scope: str, key: _KeyLike, method: str = "", path: str = ""
    ) -> Tuple[str, Dict[str, Any]]: ...

@final
class Reservation:
    @property
    def decision(self) -> Decision: ...
    @property
    def allowed(self) -> bool: ...
    @property
    def estimate(self) -> Union[int, Dict[str, int]]: ...
    @property
    def settled(self) -> bool: ...
    @property
    def over(self) -> Union[int, Dict[str, int]]: ...
    @property
    def refunded(self) -> Union[int, Dict[str, int]]: ...
    def settle(
        self, actual: Optional[_CostLike] = None, now: Optional[float] = None, **meters: int
    ) -> Optional[Decision]: ...
    def asettle(
        self, actual: Optional[_CostLike] = None, now: Optional[float] = None, **meters: int
    ) -> Coroutine[Any, Any, Optional[Decision]]: ...
    def cancel(self) -> Optional[Decision]: ...
    def acancel(self) -> Coroutine[Any, Any, Optional[Decision]]: ...
    def __enter__(self) -> "Reservation": ...
    def __exit__(self, *_exc: Any) -> bool: ...
    def __aenter__(self) -> Coroutine[Any, Any, "Reservation"]: ...
    def __aexit__(self, *_exc: Any) -> Coroutine[Any, Any, bool]: ...

@final
class Limiter:
    def __new__(
        cls,
        rules: Union[_RulesLike, _MetersLike],
        store: Optional[str] = None,
        *,
        prefix: Optional[str] = None,
        on_error: Optional[str] = None,
        timeout: Optional[float] = None,
        connect_timeout: Optional[float] = None,
        pool_size: Optional[int] = None,
        max_keys: Optional[int] = None,
        denial_cache: Optional[float] = None,
        scope: Optional[str] = None,
        tiers: Optional[Dict[str, _RulesLike]] = None,
        controls_refresh: Optional[float] = None,
        controls: Optional[bool] = None,
        redis_module: Optional[str] = None,
        policy_refresh: Optional[float] = None,
        policies: Optional[bool] = None,
    ) -> "Limiter": ...
    def check(
        self,
        key: _KeyLike,
        cost: Optional[_CostLike] = None,
        now: Optional[float] = None,
        *,
        tier: Optional[str] = None,
        ip: Optional[str] = None,
    ) -> Decision: ...
    def peek(
        self,
        key: _KeyLike,
        cost: Optional[_CostLike] = None,
        now: Optional[float] = None,
        *,
        tier: Optional[str] = None,
        ip: Optional[str] = None,
    ) -> Decision: ...
    def reserve(
        self,
        key: _KeyLike,
        cost: Optional[_CostLike] = None,
        now: Optional[float] = None,
        *,
        tier: Optional[str] = None,
        ip: Optional[str] = None,
        wait: bool = False,
        timeout: Optional[float] = None,
    ) -> "Reservation": ...
    def areserve(
        self,
        key: _KeyLike,
        cost: Optional[_CostLike] = None,
        now: Optional[float] = None,
        *,
        tier: Optional[str] = None,
        ip: Optional[str] = None,
        wait: bool = False,
        timeout: Optional[float] = None,
    ) -> Coroutine[Any, Any, "Reservation"]: ...
    def acheck(
        self,
        key: _KeyLike,
        cost: Optional[_CostLike] = None,
        now: Optional[float] = None,
        *,
        tier: Optional[str] = None,
        ip: Optional[str] = None,
    ) -> Coroutine[Any, Any, Decision]: ...
    def apeek(
        self,
        key: _KeyLike,
        cost: Optional[_CostLike] = None,
        now: Optional[float] = None,
        *,
        tier: Optional[str] = None,
        ip: Optional[str] = None,
    ) -> Coroutine[Any, Any, Decision]: ...
    def areset(self, key: _KeyLike) -> Coroutine[Any, Any, None]: ...
    def acheck_many(
        self, keys: Iterable[_KeyLike], cost: Optional[int] = None, now: Optional[float] = None
    ) -> Coroutine[Any, Any, List[Decision]]: ...
    def ascreen(self, ip: str) -> Coroutine[Any, Any, Optional[Decision]]: ...
    def apenalize(
        self,
        key: Optional[_KeyLike] = None,
        *,
        ip: Optional[str] = None,
        ban: Optional[Fail2Ban] = None,
        maxretry: Optional[int] = None,
        findtime: Optional[float] = None,
        bantime: Optional[float] = None,
        name: Optional[str] = None,
        now: Optional[float] = None,
    ) -> Coroutine[Any, Any, bool]: ...
    def acquire(
        self,
        key: _KeyLike,
        cost: Optional[_CostLike] = None,
        timeout: Optional[float] = None,
        *,
        tier: Optional[str] = None,
        ip: Optional[str] = None,
    ) -> Decision: ...
    def aacquire(
        self,
        key: _KeyLike,
        cost: Optional[_CostLike] = None,
        timeout: Optional[float] = None,
        *,
        tier: Optional[str] = None,
        ip: Optional[str] = None,
    ) -> Coroutine[Any, Any, Decision]: ...
    def limited(
        self,
        key: Any,
        *,
        cost: Optional[_CostLike] = None,
        wait: bool = True,
        timeout: Optional[float] = None,
        settle: Optional[Callable[[Any], _CostLike]] = None,
    ) -> Callable[[_F], _F]: ...
    @property
    def controls_ready(self) -> bool: ...
    @property
    def policies_ready(self) -> bool: ...
    def penalize(
        self,
        key: Optional[_KeyLike] = None,
        *,
        ip: Optional[str] = None,
        ban: Optional[Fail2Ban] = None,
        maxretry: Optional[int] = None,
        findtime: Optional[float] = None,
        bantime: Optional[float] = None,
        name: Optional[str] = None,
        now: Optional[float] = None,
    ) -> bool: ...
    def admin(self, *, actor: Optional[str] = None) -> "Admin": ...
    def screen(self, ip: str) -> Optional[Decision]: ...
    def check_many(
        self, keys: Iterable[_KeyLike], cost: Optional[int] = None, now: Optional[float] = None
    ) -> List[Decision]: ...
    def reset(self, key: _KeyLike) -> None: ...
    def with_rules(
        self, rules: _RulesLike, *, scope: Optional[str] = None, tiers: Optional[Dict[str, _RulesLike]] = None
    ) -> "Limiter": ...
    @property
    def scope(self) -> str: ...
    @property
    def tiers(self) -> List[str]: ...
    @property
    def meters(self) -> Dict[str, List[Rule]]: ...
    @property
    def rules(self) -> List[Rule]: ...
    @property
    def error_count(self) -> int: ...
    @property
    def store_stats(self) -> Dict[str, Union[int, str]]: ...
    @property
    def stats(self) -> Dict[str, Any]: ...

@final
class TrustedProxies:
    def __new__(cls, ranges: List[str] = ..., *, ipv4_prefix: Optional[int] = ..., ipv6_prefix: Optional[int] = ...) -> "TrustedProxies": ...
    def client_key(self, peer: str, forwarded_for: Optional[str] = None) -> str: ...
    def client_ip(self, peer: str, forwarded_for: Optional[str] = None) -> str: ...
    def trusts(self, ip: str) -> bool: ...

@final
class Admin:
    def __new__(
        cls, store: str = "memory://", *, prefix: str = "rk", redis_module: Optional[str] = None, actor: Optional[str] = None
    ) -> "Admin": ...
    def block(
        self,
        target: _KeyLike,
        ttl: Optional[float] = None,
        reason: str = "",
        *,
        now: Optional[float] = None,
        key: bool = False,
        force: bool = False,
        scope: Optional[str] = None,
        tag: bool = False,
    ) -> Dict[str, Any]: ...
    def safelist(
        self,
        target: _KeyLike,
        ttl: Optional[float] = None,
        reason: str = "",
        *,
        now: Optional[float] = None,
        key: bool = False,
        force: bool = False,
        tag: bool = False,
    ) -> Dict[str, Any]: ...
    def ablock(
        self,
        target: _KeyLike,
        ttl: Optional[float] = None,
        reason: str = "",
        *,
        now: Optional[float] = None,
        key: bool = False,
        force: bool = False,
        scope: Optional[str] = None,
        tag: bool = False,
    ) -> Coroutine[Any, Any, Dict[str, Any]]: ...
    def asafelist(
        self,
        target: _KeyLike,
        ttl: Optional[float] = None,
        reason: str = "",
        *,
        now: Optional[float] = None,
        key: bool = False,
        force: bool = False,
        tag: bool = False,
    ) -> Coroutine[Any, Any, Dict[str, Any]]: ...
    def aunblock(
        self, target: _KeyLike, *, key: bool = False, scope: Optional[str] = None, reason: str = "", tag: bool = False
    ) -> Coroutine[Any, Any, bool]: ...
    def aunsafelist(self, target: _KeyLike, *, key: bool = False, reason: str = "", tag: bool = False) -> Coroutine[Any, Any, bool]: ...
    def aentries(self, *, now: Optional[float] = None) -> Coroutine[Any, Any, List[Dict[str, Any]]]: ...
    def ainspect(
        self, key: _KeyLike, *, now: Optional[float] = None, scope: Optional[str] = None, tag: bool = False
    ) -> Coroutine[Any, Any, Dict[str, Any]]: ...
    def unblock(
        self, target: _KeyLike, *, key: bool = False, scope: Optional[str] = None, reason: str = "", tag: bool = False
    ) -> bool: ...
    def unsafelist(self, target: _KeyLike, *, key: bool = False, reason: str = "", tag: bool = False) -> bool: ...
    def history(self, limit: int = 50) -> List[Dict[str, Any]]: ...
    def ahistory(self, limit: int = 50) -> Coroutine[Any, Any, List[Dict[str, Any]]]: ...
    def top_denied(self, window: int = 300) -> Dict[str, Any]: ...
    def usage(self, key: _KeyLike, rules: _RulesLike, *, scope: Optional[str] = None, tag: bool = False) -> Decision: ...
    def atop_denied(self, window: int = 300) -> Coroutine[Any, Any, Dict[str, Any]]: ...
    def entries(self, *, now: Optional[float] = None) -> List[Dict[str, Any]]: ...
    def inspect(
        self, key: _KeyLike, *, now: Optional[float] = None, scope: Optional[str] = None, tag: bool = False
    ) -> Dict[str, Any]: ...
    def set_tier(self, key: _KeyLike, tier: Optional[str], *, reason: str = "") -> None: ...
    def set_override(self, key: _KeyLike, rules: Optional[_RulesLike], *, reason: str = "") -> None: ...
    def switches(self) -> Dict[str, Any]: ...
    def set_switches(
        self,
        *,
        enabled: Optional[bool] = None,
        shadow: Optional[bool] = None,
        multiplier: Optional[float] = None,
        reason: str = "",
    ) -> Dict[str, Any]: ...

def identity(text: str) -> Optional[str]: ...
