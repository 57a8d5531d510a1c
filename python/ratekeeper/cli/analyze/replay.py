"""Replaying through the core: ``replay_log`` reads the log and replays it
(without the GIL); this draws its progress bar."""

import sys
import time
from typing import Any, Dict, List, TextIO

from ratekeeper._ratekeeper import replay_log

class Progress:
    """A progress bar on stderr: bytes read out of the file's size, redrawn at
    most four times a second, first shown after half a second."""

    INTERVAL = 0.25
    WIDTH = 30

    def __init__(self, stream: TextIO, enabled: bool) -> None:
        self.stream = stream
        self.enabled = enabled
        self.start = time.monotonic()
        self.next_draw = self.start + 2 * self.INTERVAL
        self.shown = False

    def update(self, done_bytes: int, total_bytes: int, lines: int) -> None:
        """Redraws the bar if it is time to."""
        now = time.monotonic()
        if not self.enabled or now < self.next_draw:
            return
        self.next_draw = now + self.INTERVAL
        share = min(done_bytes / max(total_bytes, 1), 1.0)
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


def replay(path: str, rule_sets: List[str], key: str, period_seconds: int, show_progress: bool) -> Dict[str, Any]:
    """The core's replay of the log at ``path`` (see ``replay_log``), with a
    progress bar on stderr when ``show_progress``."""
    progress = Progress(sys.stderr, show_progress)
    try:
        return replay_log(path, rule_sets, key, period_seconds, progress.update if show_progress else None)
    finally:
        progress.close()
