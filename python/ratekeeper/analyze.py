"""``ratekeeper analyze``: replay an access log through candidate rule sets.

    python -m ratekeeper analyze access.log --rules "10/second; 300/hour" \\
        --candidates "20/second; 600/hour" --key ip --period day --plot peaks.png

Every line (combined or common log format, or JSON lines; gzip or not) is
checked by the real core: one in-memory ``Limiter`` per candidate rule set,
at the line's own time. A line the core denies "would be denied". A second
limiter, whose limits no user can reach, logs every request; the ``used``
count it reports after each check is the user's usage in the sliding window
``(t - W, t]``, so its maximum is the user's peak for window W, measured by
the core too.

Memory grows with the number of users, never with the number of lines: per
user, a few counters here, and in the core the requests of its sliding log
that are still inside the longest window.
"""

import argparse
import contextlib
import datetime
import gzip
import heapq
import importlib.util
import io
import itertools
import json
import math
import os
import re
import sys
import time
import zlib
from typing import IO, Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, TextIO, Tuple, Union

from ratekeeper._ratekeeper import ConfigurationError, Limiter, Rule

NAME = "analyze"
PEAK_LIMIT = 10_000_000
"""The core's largest limit: the measuring limiter never denies below it."""
REPLAY_MAX_KEYS = 2**31 - 1
"""Keys each replay limiter may hold: more users than memory could, so none is evicted."""
SUGGEST_FACTOR = 3
PERIOD_SECONDS = {"day": 86400, "hour": 3600}
QUANTILES = (("p50", 1, 2), ("p99", 99, 100), ("p99_9", 999, 1000))
"""Name, numerator, denominator: nearest-rank percentiles in exact integer arithmetic."""
TIME_FIELDS = ("time", "timestamp", "ts")
KEY_FIELDS = {"ip": ("ip", "remote_addr"), "user": ("user",)}
MAX_BAD_EXAMPLES = 3
PROGRESS_EVERY = 4096
# lines read to choose the format: the first that parses decides
DETECT_LINES = 1000
# how far out of order (seconds behind the newest line) a line may come and
# still be replayed in time order; an older one counts at its user's newest time
REORDER_SECONDS = 60.0
"""Lines between two looks at the clock for the progress bar."""

Parser = Callable[[str], Tuple[Optional[str], float]]


class BadLine(Exception):
    """A line that cannot be replayed; the message says why."""


# ---------------------------------------------------------------------------
# Reading the log


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
# Parsing lines: each parser returns (key or None when the line has none, epoch seconds)

_CLF = re.compile(
    r"(\S+) \S+ (\S+) \[(\d\d/[A-Za-z]{3}/\d{4}):(\d\d):(\d\d):(\d\d(?:\.\d+)?) ([+-]\d{4})\] "
    r'"[^"\\]*(?:\\.[^"\\]*)*" (?:\d{3}|-) (?:\d+|-)'
)
_MONTHS = {name: i for i, name in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split(), 1)}
_MAX_CACHED_DAYS = 4096


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
        return (None if key == "-" else key), timestamp

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
                return float(value)
            if isinstance(value, str):
                return parse_time_text(value)
            raise BadLine(f"field {field!r} is not a time")
    raise BadLine("no 'time', 'timestamp' or 'ts' field")


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


# ---------------------------------------------------------------------------
# Replaying through the core


class User:
    """What is kept per user: its current period (the newest seen; an older
    line counts in it, as the core counts an older time as the key's newest),
    bit masks of the candidates that denied it in that period and ever, and its
    peak usage per measured window."""

    __slots__ = ("period", "period_denied", "denied", "peaks")

    def __init__(self, period: int, peaks: List[int]) -> None:
        self.period = period
        self.period_denied = 0
        self.denied = 0
        self.peaks = peaks


class Candidate:
    """One candidate rule set, its limiter, and the denials it made."""

    def __init__(self, rules: str, index: int) -> None:
        self.limiter = Limiter(rules, "memory://", max_keys=REPLAY_MAX_KEYS)
        self.rules: List[Rule] = self.limiter.rules
        self.bit = 1 << index
        self.denied = 0
        self.users_affected = 0
        self.user_periods_affected = 0

    @property
    def name(self) -> str:
        """The rule set as the core spells it: ``"10/1s; 300/1h"``."""
        return "; ".join(str(rule) for rule in self.rules)

    def deny(self, user: User) -> None:
        """Counts a denied request of ``user``."""
        self.denied += 1
        if not user.denied & self.bit:
            user.denied |= self.bit
            self.users_affected += 1
        if not user.period_denied & self.bit:
            user.period_denied |= self.bit
            self.user_periods_affected += 1


def rule_windows(candidates: Sequence[Candidate]) -> List[float]:
    """Every distinct window of the candidates, shortest first."""
    return sorted({rule.window for candidate in candidates for rule in candidate.rules})


class Replay:
    """Feeds requests to every candidate limiter and to the measuring one,
    and keeps the counts of the report."""

    def __init__(self, candidates: Sequence[Candidate], period_seconds: int) -> None:
        self.candidates = list(candidates)
        self.windows = rule_windows(self.candidates)
        self.measure = Limiter([(PEAK_LIMIT, window) for window in self.windows], max_keys=REPLAY_MAX_KEYS)
        self.period_seconds = period_seconds
        self.users: Dict[str, User] = {}
        self.requests = 0
        self.unkeyed = 0
        self.user_periods = 0
        self.first_time = math.inf
        self.last_time = -math.inf
        # lines further out of order than REORDER_SECONDS
        self.late = 0

    def feed(self, key: Optional[str], timestamp: float) -> None:
        """Replays one request of ``key`` at ``timestamp`` (epoch seconds)."""
        if key is None:
            self.unkeyed += 1
            return
        try:
            usage = self.measure.check(key, now=timestamp).rules
        except ConfigurationError as exc:
            raise BadLine(f"bad time: {exc}") from None
        user = self._user(key, int(timestamp // self.period_seconds), [state.used for state in usage])
        for candidate in self.candidates:
            if not candidate.limiter.check(key, now=timestamp).allowed:
                candidate.deny(user)
        self.requests += 1
        if timestamp < self.first_time:
            self.first_time = timestamp
        if timestamp > self.last_time:
            self.last_time = timestamp

    def _user(self, key: str, period: int, used: List[int]) -> User:
        """The user of ``key``, moved on to ``period`` and its peaks raised to ``used``."""
        user = self.users.get(key)
        if user is None:
            user = self.users[key] = User(period, used)
            self.user_periods += 1
            return user
        if period > user.period:
            user.period = period
            user.period_denied = 0
            self.user_periods += 1
        user.peaks = list(map(max, user.peaks, used))
        return user

    def sorted_peaks(self) -> List[List[int]]:
        """Per measured window, every user's peak, ascending."""
        columns = zip(*(user.peaks for user in self.users.values()))
        by_window = [sorted(column) for column in columns]
        return by_window or [[] for _ in self.windows]


class BadLines:
    """Counts the lines that could not be replayed and keeps a few examples."""

    def __init__(self) -> None:
        self.count = 0
        self.examples: List[Dict[str, Any]] = []

    def add(self, line_number: int, reason: str, line: str) -> None:
        """Records a bad line."""
        self.count += 1
        if len(self.examples) < MAX_BAD_EXAMPLES:
            text = line.rstrip("\r\n")
            self.examples.append({"line": line_number, "reason": reason, "text": text[:200]})


class Progress:
    """A progress bar on stderr: bytes read out of the file's size, redrawn at
    most four times a second, first shown after half a second."""

    INTERVAL = 0.25
    WIDTH = 30

    def __init__(self, total_bytes: int, stream: TextIO, enabled: bool) -> None:
        self.total = max(total_bytes, 1)
        self.stream = stream
        self.enabled = enabled
        self.start = time.monotonic()
        self.next_draw = self.start + 2 * self.INTERVAL
        self.shown = False

    def update(self, done_bytes: int, lines: int) -> None:
        """Redraws the bar if it is time to."""
        now = time.monotonic()
        if not self.enabled or now < self.next_draw:
            return
        self.next_draw = now + self.INTERVAL
        share = min(done_bytes / self.total, 1.0)
        filled = int(share * self.WIDTH)
        rate = lines / max(now - self.start, 1e-9)
        bar = "#" * filled + "-" * (self.WIDTH - filled)
        self.stream.write(f"\r[{bar}] {share:6.1%}  {lines:,} lines  {rate:,.0f} lines/s ")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        """Erases the bar."""
        if self.shown:
            self.stream.write("\r" + " " * 79 + "\r")
            self.stream.flush()


def replay_lines(
    lines: Iterable[str], parse: Parser, replay: Replay, bad: BadLines, progress: Callable[[int], None]
) -> int:
    """Parses every line and replays the requests in time order; returns the
    number of lines read. Log writers (nginx workers, Apache) put lines a few
    seconds out of order: a line is held until the newest time seen is
    ``REORDER_SECONDS`` past it, so lines up to that far out of order are
    replayed in order (a line later still counts at its user's newest time,
    and is counted in ``replay.late``). ``progress(lines_so_far)`` is called
    every ``PROGRESS_EVERY`` lines."""
    held: List[Tuple[float, int, Optional[str]]] = []
    newest = -math.inf
    line_number = 0

    def release(until: float) -> None:
        while held and held[0][0] <= until:
            timestamp, number, key = heapq.heappop(held)
            try:
                replay.feed(key, timestamp)
            except BadLine as exc:
                bad.add(number, str(exc), "")

    for line_number, line in enumerate(lines, 1):
        if not line_number % PROGRESS_EVERY:
            progress(line_number)
        if line.isspace():
            continue
        try:
            key, timestamp = parse(line)
        except BadLine as exc:
            bad.add(line_number, str(exc), line)
            continue
        if timestamp < newest - REORDER_SECONDS:
            replay.late += 1
        heapq.heappush(held, (timestamp, line_number, key))
        if timestamp > newest:
            newest = timestamp
            release(newest - REORDER_SECONDS)
    release(math.inf)
    return line_number


# ---------------------------------------------------------------------------
# The report


def percentile(ascending: Sequence[int], numerator: int, denominator: int) -> Optional[int]:
    """Nearest-rank percentile: the smallest value that at least
    numerator/denominator of the values do not exceed (None if there are none)."""
    if not ascending:
        return None
    rank = -(-len(ascending) * numerator // denominator)
    return ascending[max(rank, 1) - 1]


def suggested_limit(p99_9: Optional[int]) -> Optional[int]:
    """ceil(3 x the p99.9 peak), within the core's limits."""
    return None if p99_9 is None else min(max(math.ceil(SUGGEST_FACTOR * p99_9), 1), PEAK_LIMIT)


def window_name(window: float) -> str:
    """The core's short name of a window: ``1s``, ``5m``, ``1d``."""
    return str(Rule(1, window)).split("/", 1)[1]


def window_stats(window: float, ascending: Sequence[int]) -> Dict[str, Any]:
    """Percentiles, maximum and suggested limit of the per-user peaks in ``window``."""
    stats: Dict[str, Any] = {"window": window_name(window), "window_seconds": window}
    for name, numerator, denominator in QUANTILES:
        stats[name] = percentile(ascending, numerator, denominator)
    stats["max"] = ascending[-1] if ascending else None
    stats["suggested_limit"] = suggested_limit(stats["p99_9"])
    return stats


def share(part: int, whole: int) -> float:
    """``part`` as a percentage of ``whole`` (0 when ``whole`` is 0)."""
    return round(100.0 * part / whole, 4) if whole else 0.0


def candidate_report(
    candidate: Candidate, replay: Replay, stats_by_window: Dict[float, Dict[str, Any]]
) -> Dict[str, Any]:
    """The JSON report of one candidate rule set."""
    windows = [dict(stats_by_window[rule.window], limit=rule.limit) for rule in candidate.rules]
    suggested = [str(Rule(w["suggested_limit"], w["window_seconds"])) for w in windows if w["suggested_limit"]]
    return {
        "rules": candidate.name,
        "denied_requests": candidate.denied,
        "denied_requests_pct": share(candidate.denied, replay.requests),
        "users_affected": candidate.users_affected,
        "users_affected_pct": share(candidate.users_affected, len(replay.users)),
        "user_periods_affected": candidate.user_periods_affected,
        "user_periods_affected_pct": share(candidate.user_periods_affected, replay.user_periods),
        "windows": windows,
        "suggested_rules": "; ".join(suggested) or None,
    }


def iso_time(timestamp: float) -> Optional[str]:
    """``2024-03-05T10:00:00Z`` (None for no time)."""
    if not math.isfinite(timestamp):
        return None
    moment = datetime.datetime.fromtimestamp(timestamp, datetime.timezone.utc)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def build_report(
    path: str,
    log_format: str,
    gzipped: bool,
    args: argparse.Namespace,
    lines: int,
    replay: Replay,
    bad: BadLines,
    peaks: List[List[int]],
) -> Dict[str, Any]:
    """The whole report, as printed by ``--json``; ``peaks`` is ``replay.sorted_peaks()``."""
    stats = [window_stats(w, ascending) for w, ascending in zip(replay.windows, peaks)]
    stats_by_window = dict(zip(replay.windows, stats))
    return {
        "file": path,
        "format": log_format,
        "gzip": gzipped,
        "key": args.key,
        "period": args.period,
        "lines": lines,
        "requests": replay.requests,
        "unkeyed_lines": replay.unkeyed,
        "late_lines": replay.late,
        "bad_lines": bad.count,
        "bad_line_examples": bad.examples,
        "first_time": iso_time(replay.first_time),
        "last_time": iso_time(replay.last_time),
        "users": len(replay.users),
        "user_periods": replay.user_periods,
        "windows": stats,
        "candidates": [candidate_report(c, replay, stats_by_window) for c in replay.candidates],
    }


def count_pct(count: int, pct: float) -> str:
    """``"1,234 (5.6%)"``."""
    shown = "<0.1" if 0 < pct < 0.05 else f"{pct:.1f}"
    return f"{count:,} ({shown}%)"


def _table(rows: List[List[str]], right_from: int = 1) -> List[str]:
    """Rows as aligned text lines: the first ``right_from`` columns to the left, the rest to the right."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            cell.ljust(w) if i < right_from else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))
        ).rstrip()
        for row in rows
    ]


def render_text(report: Dict[str, Any]) -> str:
    """The report as a readable table."""
    unit = "user-" + report["period"] + "s"
    kind = {"clf": "common/combined log format", "json": "JSON lines"}[report["format"]]
    out = [
        f"{report['file']}: {kind}{', gzip' if report['gzip'] else ''}; key: {report['key']}",
        f"  {report['lines']:,} lines: {report['requests']:,} requests replayed, "
        f"{report['unkeyed_lines']:,} without a key, {report['bad_lines']:,} bad"
        + (f", {report['late_lines']:,} more than {REORDER_SECONDS:g} s out of order" if report["late_lines"] else ""),
    ]
    for example in report["bad_line_examples"]:
        out.append(f"    line {example['line']}: {example['reason']}: {example['text'][:80]!r}")
    if report["first_time"]:
        out.append(f"  from {report['first_time']} to {report['last_time']}")
    out.append(f"  {report['users']:,} users, {report['user_periods']:,} {unit} (UTC)")
    out += ["", "Would be denied:"]
    rows = [["  rules", "requests", "users", unit]]
    for i, c in enumerate(report["candidates"]):
        label = "  " + c["rules"] + ("  (--rules)" if i == 0 else "")
        rows.append(
            [
                label,
                count_pct(c["denied_requests"], c["denied_requests_pct"]),
                count_pct(c["users_affected"], c["users_affected_pct"]),
                count_pct(c["user_periods_affected"], c["user_periods_affected_pct"]),
            ]
        )
    out += _table(rows)
    out += ["", "Per-user peak requests in any sliding window:"]
    rows = [["  window", "p50", "p99", "p99.9", "max", "suggested"]]
    for w in report["windows"]:
        rows.append(["  " + w["window"]] + [_num(w[k]) for k in ("p50", "p99", "p99_9", "max", "suggested_limit")])
    out += _table(rows)
    out += ["", f"Suggested rules ({SUGGEST_FACTOR} x the p99.9 peak):"]
    out += _table([["  " + c["rules"], "->", c["suggested_rules"] or "-"] for c in report["candidates"]], 3)
    return "\n".join(out) + "\n"


def _num(value: Optional[int]) -> str:
    """A count with thousands separators, ``-`` for none."""
    return "-" if value is None else f"{value:,}"


# ---------------------------------------------------------------------------
# The plot


def plot_peaks(report: Dict[str, Any], peaks: List[List[int]], path: str) -> None:
    """Draws, per window, the share of users whose peak reaches each count
    (log-log), with each candidate's limit and the suggested limit marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    windows = report["windows"]
    columns = min(len(windows), 3)
    rows = -(-len(windows) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(5.2 * columns, 4.2 * rows), squeeze=False)
    for ax in axes.flat[len(windows) :]:
        ax.set_visible(False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, stats, ascending in zip(axes.flat, windows, peaks):
        _plot_window(ax, stats, ascending, report["candidates"], colors)
    name = os.path.basename(report["file"])
    figure.suptitle(
        f"{name}: per-user peak requests in any sliding window ({report['users']:,} users by {report['key']})"
    )
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _plot_window(
    ax: Any, stats: Dict[str, Any], ascending: Sequence[int], candidates: List[Dict[str, Any]], colors: List[str]
) -> None:
    """One panel: the survival curve of the peaks in one window and the limits on it."""
    from matplotlib.ticker import FuncFormatter

    ax.set_title(f"{stats['window']} window")
    ax.set_xlabel(f"peak requests in {stats['window']}")
    ax.set_ylabel("users with at least this peak")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value * 100:g}%"))
    ax.grid(True, which="major", alpha=0.3)
    if not ascending:
        return
    values, shares = survival(ascending)
    ax.step(values, shares, where="pre", color="black", linewidth=1.5, label="users")
    for i, candidate in enumerate(candidates):
        for window in candidate["windows"]:
            if window["window_seconds"] == stats["window_seconds"]:
                label = f"{candidate['rules']}{' (--rules)' if i == 0 else ''}: {window['limit']:,}"
                ax.axvline(window["limit"], color=colors[i % len(colors)], linewidth=1.5, label=label)
    suggested = stats["suggested_limit"]
    ax.axvline(suggested, color="gray", linestyle="--", linewidth=1.2, label=f"suggested: {suggested:,} (3 x p99.9)")
    ax.legend(fontsize=7, loc="lower left")


def survival(ascending: Sequence[int]) -> Tuple[List[int], List[float]]:
    """Distinct peak values and, for each, the share of users whose peak is at
    least it (which is also the share for every count between it and the value before)."""
    total = len(ascending)
    values: List[int] = []
    shares: List[float] = []
    for i, value in enumerate(ascending):
        if not values or value != values[-1]:
            values.append(value)
            shares.append((total - i) / total)
    return values, shares


# ---------------------------------------------------------------------------
# The command


def rule_set(text: str) -> str:
    """argparse type of a rule set: checked by the core, whose message names the problem."""
    try:
        Limiter(text)
    except ConfigurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Adds ``analyze`` to the CLI's subcommands."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        NAME,
        help="replay an access log through candidate rules",
        description="Replay an access log (combined or common log format, or JSON lines; gzip or not) "
        "through candidate rule sets and report who would be limited, the per-user peak usage per "
        "window and a suggested limit (3 x the p99.9 peak).",
    )
    parser.add_argument("logfile", metavar="LOGFILE", help="the access log (gzip is detected)")
    parser.add_argument("--rules", required=True, type=rule_set, help='the rule set to try, e.g. "10/second; 300/hour"')
    parser.add_argument(
        "--candidates",
        nargs="+",
        action="extend",
        default=[],
        type=rule_set,
        metavar="RULES",
        help="more rule sets to compare",
    )
    parser.add_argument("--key", default="ip", help="who is limited: ip (default), user, or any field of JSON lines")
    parser.add_argument(
        "--period",
        choices=sorted(PERIOD_SECONDS),
        default="day",
        help="calendar period (UTC) of the user-periods (default: day)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as one JSON document")
    parser.add_argument("--plot", metavar="PNG", help="draw the per-user peak distribution (needs matplotlib)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Runs ``analyze``: 0 when done, 1 when the log cannot be read; bad
    arguments exit through ``parser.error`` (code 2)."""
    if args.plot and not args.plot.lower().endswith(".png"):
        parser.error(f"--plot writes a PNG image: give a path ending in .png, not {args.plot!r}")
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        parser.error("--plot needs matplotlib, which is not installed: pip install matplotlib")
    candidates = [Candidate(text, i) for i, text in enumerate([args.rules] + args.candidates)]
    replay = Replay(candidates, PERIOD_SECONDS[args.period])
    bad = BadLines()
    try:
        with open_log(args.logfile) as (text, raw, gzipped):
            head, lines = split_head(text)
            log_format = detect_format(head)
            if log_format is None:
                print(f"{parser.prog}: error: no line of {args.logfile} is in the combined log format or a JSON "
                      f"object (read the first {len(head)} lines)", file=sys.stderr)
                return 1
            try:
                parse = make_parser(log_format, args.key)
            except ValueError as exc:
                parser.error(str(exc))
            progress = Progress(
                os.fstat(raw.fileno()).st_size, sys.stderr, not args.no_progress and sys.stderr.isatty()
            )
            try:
                count = replay_lines(lines, parse, replay, bad, lambda n: progress.update(raw.tell(), n))
            finally:
                progress.close()
    except (OSError, EOFError, zlib.error) as exc:
        print(f"{parser.prog}: error: cannot read {args.logfile}: {exc}", file=sys.stderr)
        return 1
    peaks = replay.sorted_peaks()
    report = build_report(args.logfile, log_format, gzipped, args, count, replay, bad, peaks)
    sys.stdout.write(json.dumps(report, indent=2) + "\n" if args.json else render_text(report))
    if args.plot:
        try:
            plot_peaks(report, peaks, args.plot)
        except OSError as exc:
            print(f"{parser.prog}: error: cannot write {args.plot}: {exc}", file=sys.stderr)
            return 1
    return 0
