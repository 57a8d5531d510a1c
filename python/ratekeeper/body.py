"""The request body field a policy's ``identity:FIELD`` key reads: a field of
a posted form or of a JSON object, from a body of at most ``MAX_BODY`` bytes
(with a ``Content-Length`` that says so). The WSGI, ASGI and FastAPI doors
read the body with it; Django and Rack read it as their frameworks parse it.
"""

import json
from typing import Optional
from urllib.parse import parse_qs

# The most of a request body read for an ``identity:FIELD`` key.
MAX_BODY = 64 * 1024


def readable_length(content_length: Optional[str]) -> Optional[int]:
    """The body's length when a door may read it for a field (1 to
    ``MAX_BODY`` bytes, as ``Content-Length`` says), else None."""
    try:
        length = int(content_length or 0)
    except ValueError:
        return None
    return length if 0 < length <= MAX_BODY else None


def field(content_type: Optional[str], raw: bytes, name: str) -> Optional[str]:
    """Field ``name`` of a form (``application/x-www-form-urlencoded``) or a
    JSON object body; None when absent, not a string, or another type."""
    kind = (content_type or "").split(";")[0].strip().lower()
    if kind == "application/x-www-form-urlencoded":
        values = parse_qs(raw.decode("latin-1"), keep_blank_values=True).get(name)
        return values[0] if values else None
    if kind == "application/json":
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            return None
        value = body.get(name) if isinstance(body, dict) else None
        return value if isinstance(value, str) else None
    return None
