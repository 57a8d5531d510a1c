"""``manage.py ratekeeper COMMAND ...``: the ``ratekeeper`` admin commands
(block, unblock, safelist, unsafelist, list, inspect, set-tier,
set-override, clear-override, switch) on the store and prefix that
settings.RATEKEEPER configures (``--store``/``--prefix`` still override)."""

import argparse
from typing import Any, List

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ratekeeper import cli
from ratekeeper.django.conf import get_config


class Command(BaseCommand):
    """Runs one ratekeeper admin command with the project's store."""

    help = "ratekeeper admin commands (block, unblock, safelist, list, inspect, set-tier, switch...) on the configured store"

    def add_arguments(self, parser: CommandParser) -> None:
        """Everything after the command name goes to the ratekeeper tool."""
        parser.add_argument("words", nargs=argparse.REMAINDER, help="a ratekeeper command and its arguments")

    def handle(self, *args: Any, **options: Any) -> None:
        """Runs the command; a non-zero exit becomes a CommandError with that code."""
        words: List[str] = list(options.get("words") or args)
        if words and words[0] not in {"analyze", "-h", "--help", "--version"}:
            get_config()  # the settings are checked first
            from django.conf import settings

            raw = getattr(settings, "RATEKEEPER", None) or {}
            if "--store" not in words:
                words += ["--store", raw.get("STORE", "memory://")]
            if "--prefix" not in words:
                words += ["--prefix", raw.get("PREFIX", "rk")]
        code = cli.main(words)
        if code:
            raise CommandError(f"ratekeeper {' '.join(words[:1])} failed (exit {code})", returncode=code)
