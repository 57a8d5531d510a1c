"""Reading the log: opening it (gzip or not), choosing its format from the
first lines, and the line parsers (common/combined log format, JSON lines).
Each parser returns (key or None when the line has none, epoch seconds) or
raises ``BadLine``."""

import contextlib
import datetime
import gzip
import io
import itertools
import json
import re
from typing import IO, Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, TextIO, Tuple, Union

TIME_FIELDS = ("time", "timestamp", "ts")
#: The times a record may carry, in epoch seconds: from 1970 up to 2200.
EARLIEST_TIME = 0.0
LATEST_TIME = 7_258_118_400.0
KEY_FIELDS = {"ip": ("ip", "remote_addr"), "user": ("user",)}
# lines read to choose the format: the first that parses decides
DETECT_LINES = 1000

Parser = Callable[[str], Tuple[Optional[str], float]]

_CLF = re.compile(
    r"(\S+) \S+ (\S+) \[(\d\d/[A-Za-z]{3}/\d{4}):(\d\d):(\d\d):(\d\d(?:\.\d+)?) ([+-]\d{4})\] "
    r'"[^"\\]*(?:\\.[^"\\]*)*" (?:\d{3}|-) (?:\d+|-)'
)
_MONTHS = {name: i for i, name in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split(), 1)}
_MAX_CACHED_DAYS = 4096


class BadLine(Exception):
    """A line that cannot be replayed; the message says why."""


# ---------------------------------------------------------------------------
# Opening the log and choosing its format


@contextlib.contextmanager
def open_log(path: str) -> Iterator[Tuple[TextIO, IO[bytes], bool]]:
    """Opens ``path`` for reading lines, un-gzipping it when its name ends in
    ``.gz`` or it starts with the gzip magic. Yields the text stream, the raw
    file (whose ``tell()`` is the number of bytes read, for progress) and
    whether the file is gzipped."""
    with open(path, "rb") as raw:
        gzipped = path.endswith(".gz") or raw.peek(2)[:2] == b"\x1f\x8b"
        binary: Union[gzip.GzipFile, io.BufferedReader] = gzip.GzipFile(fileobj=raw, mode="rb") if gzipped else raw
        with io.TextIOWrapper(binary, encoding="utf-8", errors="replace") as text:
            yield text, raw, gzipped


def split_head(lines: Iterable[str], size: int = DETECT_LINES) -> Tuple[List[str], Iterator[str]]:
    """The first ``size`` non-blank lines, and an iterator over all lines,
    those included."""
    it = iter(lines)
    head: List[str] = []
    found: List[str] = []
    for line in it:
        head.append(line)
        if not line.isspace():
            found.append(line)
            if len(found) == size:
                break
    return found, itertools.chain(head, it)


def detect_format(head: Sequence[str]) -> Optional[str]:
    """``"json"`` or ``"clf"``: the format of the first of ``head`` that is a
    JSON object or a common/combined log line (a cut-off first line does not
    decide); None when none is either."""
    for line in head:
        if _CLF.match(line):
            return "clf"
        if line.lstrip().startswith("{"):
            try:
                if isinstance(json.loads(line), dict):
                    return "json"
            except ValueError:
                pass
    return None


# ---------------------------------------------------------------------------
# Parsing lines


class ClfParser:
    """Parses a line of the common or combined log format (Apache, nginx):
    ``host ident authuser [10/Oct/2000:13:55:36 -0700] "request" status bytes ...``.
    The key is the host (``ip``) or the authuser (``user``); ``-`` means none."""

    def __init__(self, key: str) -> None:
        if key not in KEY_FIELDS:
            raise ValueError(f"--key {key}: the common and combined log formats have only 'ip' and 'user'")
        self._group = 1 if key == "ip" else 2
        self._midnights: Dict[Tuple[str, str], float] = {}

    def __call__(self, line: str) -> Tuple[Optional[str], float]:
        match = _CLF.match(line)
        if match is None:
            raise BadLine("not in common or combined log format")
        date, hours, minutes, seconds, zone = match.group(3, 4, 5, 6, 7)
        midnight = self._midnights.get((date, zone))
        if midnight is None:
            midnight = self._midnight(date, zone)
        if hours >= "24" or minutes >= "60" or seconds >= "61":
            raise BadLine(f"bad time {hours}:{minutes}:{seconds}")
        key = match.group(self._group)
        timestamp = midnight + int(hours) * 3600 + int(minutes) * 60 + float(seconds)
        return (None if key == "-" else key), checked_time(timestamp, date)

    def _midnight(self, date: str, zone: str) -> float:
        """Epoch seconds of 00:00 on ``date`` (``10/Oct/2000``) in ``zone`` (``-0700``), cached."""
        day, month_name, year = date.split("/")
        month = _MONTHS.get(month_name.lower())
        try:
            if month is None:
                raise ValueError(f"unknown month {month_name!r}")
            offset = datetime.timedelta(hours=int(zone[1:3]), minutes=int(zone[3:5]))
            tz = datetime.timezone(-offset if zone[0] == "-" else offset)
            midnight = datetime.datetime(int(year), month, int(day), tzinfo=tz).timestamp()
        except ValueError as exc:
            raise BadLine(f"bad date {date} {zone}: {exc}") from None
        if len(self._midnights) >= _MAX_CACHED_DAYS:
            self._midnights.clear()
        self._midnights[(date, zone)] = midnight
        return midnight


class JsonParser:
    """Parses a JSON-lines record: an object with a time field (``time``,
    ``timestamp`` or ``ts``: epoch seconds or ISO 8601, UTC when no zone is
    given) and the key field (``ip`` or ``remote_addr`` for ``ip``, ``user``
    for ``user``, else the field of that name). A key that is null, empty or
    ``-`` means none; a missing one is a bad line."""

    def __init__(self, key: str) -> None:
        self._fields = KEY_FIELDS.get(key, (key,))

    def __call__(self, line: str) -> Tuple[Optional[str], float]:
        try:
            record = json.loads(line)
        except ValueError:
            raise BadLine("not valid JSON") from None
        if not isinstance(record, dict):
            raise BadLine("not a JSON object")
        return json_key(record, self._fields), json_time(record)


def json_key(record: Dict[str, Any], fields: Sequence[str]) -> Optional[str]:
    """The value of the first of ``fields`` present in ``record``, as a key."""
    for field in fields:
        if field in record:
            value = record[field]
            if value is None or value == "" or value == "-":
                return None
            if isinstance(value, str):
                return value
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return str(value)
            raise BadLine(f"field {field!r} is not a string or a number")
    raise BadLine("no " + " or ".join(repr(field) for field in fields) + " field")


def json_time(record: Dict[str, Any]) -> float:
    """The record's time in epoch seconds, from its first time field."""
    for field in TIME_FIELDS:
        if field in record:
            value = record[field]
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return checked_time(float(value), value)
            if isinstance(value, str):
                return checked_time(parse_time_text(value), value)
            raise BadLine(f"field {field!r} is not a time")
    raise BadLine("no 'time', 'timestamp' or 'ts' field")


def checked_time(timestamp: float, written: Any) -> float:
    """``timestamp`` when it is a time from 1970 up to 2200; else (NaN,
    infinities, ``1e300``) a bad line quoting the time as ``written``."""
    if not EARLIEST_TIME <= timestamp < LATEST_TIME:
        raise BadLine(f"bad time {written!r}: give a time from 1970 up to 2200")
    return timestamp


def parse_time_text(text: str) -> float:
    """Epoch seconds from ``"1700000000.5"`` or an ISO 8601 time (UTC if it has no zone)."""
    try:
        return float(text)
    except ValueError:
        pass
    iso = text.strip()
    if iso[-1:] in ("Z", "z"):
        iso = iso[:-1] + "+00:00"
    try:
        moment = datetime.datetime.fromisoformat(iso)
    except ValueError:
        raise BadLine(f"bad time {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return moment.timestamp()


def make_parser(log_format: str, key: str) -> Parser:
    """The line parser for a detected format and a ``--key``."""
    return JsonParser(key) if log_format == "json" else ClfParser(key)
