"""``ratekeeper analyze``: replay an access log through candidate rule sets.

    python -m ratekeeper analyze access.log --rules "10/second; 300/hour" \\
        --candidates "20/second; 600/hour" --key ip --period day --plot peaks.png

The replay is the core's (``replay_log``, without the GIL): it reads the
log (combined or common log format, or JSON lines; gzip or not), replays
every line at its own time through one exact sliding log per user and
candidate rule set, the same admission as a ``Limiter``'s (held to the
engine by the core's tests), and a measuring log whose limits no user
reaches: the usage it counts after each request is the user's usage in the
sliding window ``(t - W, t]``, so its maximum is the user's peak for window W.

Memory grows with the number of users, never with the number of lines: per
user, a few counters and the times of its requests still inside the
longest window.

The modules: ``replay`` (the call into the core and the progress bar),
``report`` (statistics, the JSON report and its text), ``plot`` (the
optional matplotlib figure) and ``command`` (the argparse command).
``rules`` holds the helpers that build core objects only to check rule text
or spell a window.
"""

from ratekeeper.cli.analyze.command import NAME, add_parser, run
from ratekeeper.cli.analyze.report import QUANTILES, percentile

__all__ = ["NAME", "QUANTILES", "add_parser", "percentile", "run"]
