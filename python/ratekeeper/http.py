"""What every HTTP integration answers when a request is limited: the 429
JSON body and its headers. The numbers all come from ``Decision.headers()``."""

import hashlib
import json
import logging
import math
from typing import Dict, List, Optional, Tuple, Union

from ratekeeper._ratekeeper import Decision

DEFAULT_STATUS = 429
BLOCKED_STATUS = 403
BLOCKED_BODY = json.dumps({"error": "blocked"}).encode()
DENIALS = logging.getLogger("ratekeeper.denials")


def retry_after_seconds(decision: Decision) -> int:
    """Retry-After in whole seconds, rounded up (1 when the cost can never pass)."""
    wait = decision.retry_after
    return 1 if wait is None else int(math.ceil(wait))


def denial_body(decision: Decision) -> bytes:
    """The JSON body of a denial: ``{"error": "rate_limited", "retry_after": N}``."""
    return json.dumps({"error": "rate_limited", "retry_after": retry_after_seconds(decision)}).encode()


def header_items(decision: Decision) -> List[Tuple[str, str]]:
    """The decision's headers as a list of (name, value) pairs."""
    return list(decision.headers().items())


def denial_headers(decision: Decision) -> Dict[str, str]:
    """Headers of a denial: the decision's, Retry-After and the JSON content type."""
    headers = decision.headers()
    headers.setdefault("Retry-After", str(retry_after_seconds(decision)))
    headers["Content-Type"] = "application/json"
    return headers


def shown_key(key: Union[str, bytes], log_keys: bool) -> str:
    """A key as a log shows it: as it is when the user opts in, else the first
    16 hex digits of its SHA-256, which tell keys apart without revealing them."""
    raw = key.encode() if isinstance(key, str) else key
    if log_keys:
        return raw.decode("utf-8", "backslashreplace")
    return "sha256:" + hashlib.sha256(raw).hexdigest()[:16]


def log_denial(
    level: Optional[Union[int, str]],
    scope: str,
    key: Union[str, bytes],
    decision: Decision,
    method: str = "",
    path: str = "",
    log_keys: bool = False,
) -> None:
    """One structured line per denial on the `ratekeeper.denials` logger, in
    logfmt, with the same fields in `extra` for structured handlers; nothing
    when `level` is None."""
    if level is None:
        return
    number = logging.getLevelName(level.upper()) if isinstance(level, str) else level
    if not isinstance(number, int) or not DENIALS.isEnabledFor(number):
        return
    fields = {
        "scope": scope,
        "key": shown_key(key, log_keys),
        "limit": decision.limit,
        "window": decision.window,
        "retry_after": decision.retry_after,
        "method": method,
        "path": path,
    }
    text = " ".join(f"{name}={json.dumps(value)}" for name, value in fields.items())
    DENIALS.log(number, "rate_limited %s", text, extra={"ratekeeper": fields})
