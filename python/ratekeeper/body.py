"""The request body field a policy's ``identity:FIELD`` key reads: a field of
a posted form or of a JSON object, from a body of at most ``MAX_BODY`` bytes
(with a ``Content-Length`` that says so). The WSGI, ASGI, FastAPI and
Django doors read the body with it (Django giving only the bytes).

A reader answers the field's value, a list of its values (a repeated form
field: each is counted), None when the body has no such field (or there is
no body), or ``UNREADABLE`` when there is a body the door cannot read while
the app may (longer than ``MAX_BODY``, without a length, multipart, a type
it does not parse): the throttle then counts the client instead of letting
the request past unkeyed.
"""

import json
from typing import List, Literal, Optional, Union
from urllib.parse import parse_qs

from ratekeeper._ratekeeper import _MAX_BODY, _readable_length

# The most of a request body read for an ``identity:FIELD`` key (the core's cap).
MAX_BODY = _MAX_BODY

# What a reader answers for a body it cannot read (the binding's "unreadable").
UNREADABLE: Literal[False] = False

# A field's value as a reader gives it to the gate.
Found = Union[None, str, List[str], Literal[False]]

# The JSON media types frameworks parse (Rails: text/x-json and
# application/jsonrequest too; FastAPI any +json).
_JSON_TYPES = ("application/json", "text/x-json", "application/jsonrequest")


def readable_length(content_length: Optional[str], transfer_encoding: Optional[str] = None) -> Optional[int]:
    """How much of the body a door reads for a field (the core decides, for
    every door): its length (1 to ``MAX_BODY`` bytes, as ``Content-Length``
    says); 0 when the request has no body; None when it has one the door
    may not read (longer, chunked without a length, a length that is not a
    number)."""
    return _readable_length(content_length, transfer_encoding)


def media_type(content_type: Optional[str]) -> str:
    """A Content-Type's media type, lower case, without its parameters."""
    return (content_type or "").split(";")[0].strip().lower()


def is_json(kind: str) -> bool:
    """Whether a media type is one a framework reads as JSON."""
    return kind in _JSON_TYPES or kind.endswith("+json")


def field(content_type: Optional[str], raw: bytes, name: str) -> Found:
    """Field ``name`` of a form (``application/x-www-form-urlencoded``: each
    value of a repeated field) or a JSON object body; None when absent or
    not a string (or the body is empty or not JSON); ``UNREADABLE`` for a
    body of another type (multipart, or one the app may parse itself)."""
    kind = media_type(content_type)
    if kind == "application/x-www-form-urlencoded":
        values = parse_qs(raw.decode("latin-1"), keep_blank_values=True).get(name)
        if not values:
            return None
        return values[0] if len(values) == 1 else values
    if is_json(kind):
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            return None
        value = body.get(name) if isinstance(body, dict) else None
        return value if isinstance(value, str) else None
    return UNREADABLE if raw else None


def unreadable(name: str) -> Found:
    """The reader of a body the door may not read: every field UNREADABLE."""
    return UNREADABLE
