"""The logging glue of the HTTP adapters. What they answer (statuses,
headers, bodies, the denial log line) is the core's: ``ratekeeper.Responses``.
"""

import logging
from typing import Optional, Union

from ratekeeper._ratekeeper import Decision, Responses

DENIALS = logging.getLogger("ratekeeper.denials")


def log_denial(
    level: Optional[Union[int, str]],
    responses: Responses,
    scope: str,
    key: Union[str, bytes],
    decision: Decision,
    method: str = "",
    path: str = "",
) -> None:
    """The core's one line per denial on the `ratekeeper.denials` logger (with
    its fields in ``extra["ratekeeper"]`` for structured handlers); nothing
    when `level` is None."""
    if level is None:
        return
    number = logging.getLevelName(level.upper()) if isinstance(level, str) else level
    if not isinstance(number, int) or not DENIALS.isEnabledFor(number):
        return
    text, fields = responses.denial_log(decision, scope, key, method, path)
    DENIALS.log(number, "%s", text, extra={"ratekeeper": fields})
