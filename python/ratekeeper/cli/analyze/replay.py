"""Replaying through the core: one in-memory limiter per candidate rule set
and a measuring one whose limits no user reaches, fed the parsed lines in
time order, with the per-user counts, the bad lines and the progress bar."""

import heapq
import math
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, TextIO, Tuple

from ratekeeper._ratekeeper import ConfigurationError, Limiter, Rule
from ratekeeper.cli.analyze.parse import BadLine, Parser

PEAK_LIMIT = 10_000_000
"""The core's largest limit: the measuring limiter never denies below it."""
REPLAY_MAX_KEYS = 2**31 - 1
"""Keys each replay limiter may hold: more users than memory could, so none is evicted."""
MAX_BAD_EXAMPLES = 3
PROGRESS_EVERY = 4096
"""Lines between two looks at the clock for the progress bar."""
# how far out of order (seconds behind the newest line) a line may come and
# still be replayed in time order; an older one counts at its user's newest time
REORDER_SECONDS = 60.0


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
        """Replays the held lines up to time ``until``, oldest first."""
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
