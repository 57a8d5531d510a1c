"""The ``check`` and ``wait`` commands of the ``ratekeeper`` tool, for shell
scripts and cron jobs sharing a quota with the apps:

    ratekeeper wait partner-api --rules "10/second; 1000/day" && curl ...
    ratekeeper check partner-api --rules "10/second" --json

``check`` checks once: exit 0 admitted, 1 denied (the wait printed). ``wait``
waits for a slot: exit 0 admitted, 1 when the next wait would end past
``--timeout`` (or the cost can never pass). Both take ``--store``,
``--prefix`` (as the admin commands), ``--scope`` (the limiter's: the same
quota as an app's limiter with that scope), ``--cost`` and ``--json``; 2 is
bad arguments, 4 the store failed. A memory store is refused: a command's
own memory is gone when it exits. A limiter with meters is given by
``--meter NAME=RULES`` (once per meter) in place of ``--rules``, and its cost
by ``--cost NAME=UNITS`` (once per meter charged):

    ratekeeper wait openai --meter "requests=3500/minute" --meter "tokens=90000/minute" \
        --cost requests=1 --cost tokens=1500 && curl ...

``wait --hold`` runs a command while it holds a slot of the rules' in-flight
rule, and exits with the command's status (1 when no slot came within
``--timeout``): the slot is released when the command ends, its lease
(``--lease`` seconds, default 60) extended while it runs, and lapses if
this process is killed:

    ratekeeper wait export --rules "2 concurrent; 100/hour" --hold -- ./export.sh
"""

import argparse
import json
import subprocess
import sys
import threading
from typing import Any, Dict, List, Optional, Tuple

from ratekeeper._ratekeeper import ConfigurationError, Decision, Limiter, RateLimitExceeded, StorageError
from ratekeeper.cli.admin import printable, store_arguments

ADMITTED, DENIED, USAGE, STORE_FAILED = 0, 1, 2, 4


def _arguments(parser: argparse.ArgumentParser, waits: bool) -> None:
    parser.add_argument("key", help="the key, as the applications check it")
    parser.add_argument("--rules", help="the rules, such as '10/second; 1000/day'")
    parser.add_argument("--meter", action="append", default=[], metavar="NAME=RULES",
                        help="a meter and its rules, in place of --rules (once per meter)")
    parser.add_argument("--cost", action="append", default=[], metavar="UNITS|NAME=UNITS",
                        help="units the call costs (default 1); with meters, NAME=UNITS per meter charged")
    parser.add_argument("--scope", default="", help="the limiter's scope (the quota an app keeps under it)")
    store_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the decision as JSON")
    if waits:
        parser.add_argument("--timeout", type=float, default=None,
                            help="seconds to wait at most (default: as long as it takes)")
        parser.add_argument("--hold", action="store_true",
                            help="hold a slot of the in-flight rule while COMMAND (after --) runs")
        parser.add_argument("--lease", type=float, default=None,
                            help="with --hold: seconds the slot's lease lasts unless extended (default 60)")
        parser.epilog = "with --hold, the command to run holding the slot follows --: ... --hold -- COMMAND [ARG ...]"


def _report(decision: Decision, as_json: bool) -> None:
    if as_json:
        print(json.dumps(decision.to_dict()))
    elif decision.allowed:
        print(f"admitted: {decision.remaining} left of {decision.limit} per {decision.rules[0].window:g}s window"
              if decision.rules else "admitted")
    else:
        wait = "never (the cost exceeds a limit)" if decision.retry_after is None else f"{decision.retry_after:g} s"
        print(f"denied: retry in {wait}")


def _pairs(given: List[str], what: str) -> Dict[str, str]:
    """``NAME=VALUE`` arguments as a dict (a ValueError names a bad one)."""
    pairs: Dict[str, str] = {}
    for item in given:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ValueError(f"{what} takes NAME=VALUE, not {item!r}")
        pairs[name] = value
    return pairs


def _limits_and_cost(args: argparse.Namespace) -> Tuple[Any, Any]:
    """The limiter's rules (or meters) and the call's cost, from the arguments."""
    if bool(args.rules) == bool(args.meter):
        raise ValueError("give --rules or --meter NAME=RULES (once per meter), one of them")
    if args.rules:
        if len(args.cost) > 1 or any("=" in c for c in args.cost):
            raise ValueError("--cost takes one whole number without meters")
        return args.rules, int(args.cost[0]) if args.cost else 1
    cost = {name: int(units) for name, units in _pairs(args.cost, "--cost").items()}
    return _pairs(args.meter, "--meter"), cost


def _run_holding(limiter: Limiter, args: argparse.Namespace, cost: Any) -> Tuple[Decision, Optional[int]]:
    """Waits for a slot, then runs the command holding it (its lease
    extended every third of its time): the hold's decision, and the
    command's exit status (None when no slot came)."""
    lease = limiter.hold(args.key, cost, lease=args.lease, wait=True, timeout=args.timeout)
    if not lease.allowed:
        return lease.decision, None
    done = threading.Event()
    every = (lease.lapse_at - lease.taken_at) / 3

    def extend() -> None:
        while not done.wait(every):
            try:
                lease.extend(args.lease)
            except StorageError as exc:
                print(f"ratekeeper wait: the lease was not extended: {printable(exc)}", file=sys.stderr)

    extender = threading.Thread(target=extend, daemon=True)
    extender.start()
    try:
        try:
            status = subprocess.call(args.program)
        except OSError as exc:  # as a shell answers a command it cannot run
            print(f"ratekeeper wait: cannot run {args.program[0]!r}: {exc.strerror}", file=sys.stderr)
            status = 127
    finally:
        done.set()
        extender.join()
        lease.release()
    return lease.decision, status


class ShellCommand:
    """One of the two commands, as ratekeeper.cli takes its commands."""

    def __init__(self, name: str, help: str, waits: bool) -> None:
        self.NAME = name
        self.help = help
        self.waits = waits

    def add_parser(self, subparsers: Any) -> argparse.ArgumentParser:
        parser = subparsers.add_parser(self.NAME, help=self.help, description=self.help)
        _arguments(parser, self.waits)
        parser.set_defaults(run=self.run)
        return parser

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        """Runs the command; returns the exit code."""
        if args.store.strip().lower().startswith("memory:"):
            print(f"ratekeeper {self.NAME}: --store memory:// is this command's own memory, gone when it exits: "
                  "give the Redis URL the applications use", file=sys.stderr)
            return USAGE
        holding = self.waits and args.hold
        if bool(args.program) != holding:
            print(f"ratekeeper {self.NAME}: --hold runs a command, given after --: give both or neither",
                  file=sys.stderr)
            return USAGE
        try:
            limits, cost = _limits_and_cost(args)
            limiter = Limiter(limits, args.store, prefix=args.prefix, scope=args.scope, on_error="raise",
                              timeout=2.0, connect_timeout=2.0, redis_module=args.redis_module)
            decision: Optional[Decision]
            if holding:
                decision, status = _run_holding(limiter, args, cost)
                if status is not None:
                    return status
            elif self.waits:
                try:
                    decision = limiter.acquire(args.key, cost, args.timeout)
                except RateLimitExceeded as exc:
                    decision = exc.decision
            else:
                decision = limiter.check(args.key, cost)
        except (ConfigurationError, TypeError, ValueError) as exc:
            print(f"ratekeeper {self.NAME}: {printable(exc)}", file=sys.stderr)
            return USAGE
        except StorageError as exc:
            print(f"ratekeeper {self.NAME}: the store failed: {printable(exc)}", file=sys.stderr)
            return STORE_FAILED
        _report(decision, args.json)
        return ADMITTED if decision.allowed else DENIED


COMMANDS = [
    ShellCommand("check", "check KEY once: exit 0 admitted, 1 denied", waits=False),
    ShellCommand("wait", "wait until KEY is admitted: exit 0 admitted, 1 at --timeout", waits=True),
]
