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

The modules, in the order a line goes through them: ``parse`` (opening the
log, choosing its format, the line parsers), ``replay`` (the limiters and
the counts), ``report`` (statistics, the JSON report and its text),
``plot`` (the optional matplotlib figure) and ``command`` (the argparse
command). ``rules`` holds the helpers that build core objects only to check
rule text or spell a window.
"""

from ratekeeper.cli.analyze.command import NAME, add_parser, run
from ratekeeper.cli.analyze.report import QUANTILES, percentile

__all__ = ["NAME", "QUANTILES", "add_parser", "percentile", "run"]
