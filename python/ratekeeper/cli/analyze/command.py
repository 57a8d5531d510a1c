"""The ``analyze`` command: its arguments, their checks, and ``run``, which
reads the log, replays it and prints (and plots) the report."""

import argparse
import importlib.util
import json
import sys
from typing import Any

from ratekeeper._ratekeeper import ConfigurationError
from ratekeeper.cli.analyze.plot import plot_peaks
from ratekeeper.cli.analyze.replay import replay
from ratekeeper.cli.analyze.report import build_report, render_text
from ratekeeper.cli.analyze.rules import rule_set

NAME = "analyze"
PERIOD_SECONDS = {"day": 86400, "hour": 3600}


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


def check_plot(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Exits through ``parser.error`` when ``--plot`` cannot be honoured."""
    if args.plot and not args.plot.lower().endswith(".png"):
        parser.error(f"--plot writes a PNG image: give a path ending in .png, not {args.plot!r}")
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        parser.error("--plot needs matplotlib, which is not installed: pip install matplotlib")


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Runs ``analyze``: 0 when done, 1 when the log cannot be read; bad
    arguments exit through ``parser.error`` (code 2)."""
    check_plot(args, parser)
    show_progress = not args.no_progress and sys.stderr.isatty()
    try:
        rule_sets = [args.rules] + args.candidates
        replayed = replay(args.logfile, rule_sets, args.key, PERIOD_SECONDS[args.period], show_progress)
    except ConfigurationError as exc:
        parser.error(str(exc))
    except OSError as exc:
        print(f"{parser.prog}: error: cannot read {args.logfile}: {exc}", file=sys.stderr)
        return 1
    if replayed["format"] is None:
        print(f"{parser.prog}: error: no line of {args.logfile} is in the combined log format or a JSON "
              f"object (read the first {replayed['head_lines']} lines)", file=sys.stderr)
        return 1
    report = build_report(args.logfile, args, replayed)
    text = json.dumps(report, indent=2) + "\n" if args.json else render_text(report, replayed["reorder_seconds"])
    sys.stdout.write(text)
    if args.plot:
        try:
            plot_peaks(report, replayed["peaks"], args.plot)
        except OSError as exc:
            print(f"{parser.prog}: error: cannot write {args.plot}: {exc}", file=sys.stderr)
            return 1
    return 0
