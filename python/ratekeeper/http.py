"""What every HTTP integration answers when a request is limited: the 429
JSON body and its headers. The numbers all come from ``Decision.headers()``."""

import json
import math
from typing import Dict, List, Tuple

from ratekeeper._ratekeeper import Decision

DEFAULT_STATUS = 429


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
