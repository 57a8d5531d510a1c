"""The ``ratekeeper`` command line: ``ratekeeper COMMAND ...`` (also ``python -m ratekeeper``).

Each command is a module with ``NAME``, ``add_parser(subparsers)`` (returning
its parser, with ``run`` set as a default) and ``run(args, parser) -> int``;
adding a command means adding its module to ``COMMANDS``.
"""

import argparse
import sys
from typing import Dict, List, Optional, Tuple

from ratekeeper import __version__
from ratekeeper.cli import admin, analyze, shell

COMMANDS = (analyze, *admin.COMMANDS, *shell.COMMANDS)


def build_parser() -> Tuple[argparse.ArgumentParser, Dict[str, argparse.ArgumentParser]]:
    """The top-level parser and each command's parser, by name."""
    parser = argparse.ArgumentParser(prog="ratekeeper", description="ratekeeper: exact multi-rule rate limiting.")
    parser.add_argument("--version", action="version", version=f"ratekeeper {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    commands = {module.NAME: module.add_parser(subparsers) for module in COMMANDS}
    return parser, commands


def main(argv: Optional[List[str]] = None) -> int:
    """Runs one command and returns its exit code: 0 ok, 1 failed, 2 bad
    arguments, 3 not found (see ratekeeper.cli.admin)."""
    parser, commands = build_parser()
    given = list(sys.argv[1:] if argv is None else argv)
    # what follows `--` is a program to run (`wait --hold -- COMMAND ...`), never options
    program = given[given.index("--") + 1:] if "--" in given else []
    given = given[:given.index("--")] if "--" in given else given
    try:
        args = parser.parse_args(given)
        args.program = program
        code: int = args.run(args, commands[args.command])
        return code
    except SystemExit as exc:  # argparse reports bad arguments (and --help) by exiting
        return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    except KeyboardInterrupt:  # Ctrl-C: a long `analyze` stops within 4,096 lines
        print(f"{parser.prog}: interrupted", file=sys.stderr)
        return 130
