"""What ``analyze`` asks the core about rules without limiting anything:
checking rule text, and spelling windows and rules as the core does."""

import argparse

from ratekeeper._ratekeeper import ConfigurationError, Rule, parse_rules


def rule_set(text: str) -> str:
    """argparse type of a rule set: checked by the core, whose message names the problem."""
    try:
        parse_rules(text)
    except ConfigurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def window_name(window: float) -> str:
    """The core's short name of a window: ``1s``, ``5m``, ``1d``."""
    return Rule(1, window).window_name


def rule_name(limit: int, window: float) -> str:
    """The core's spelling of a rule: ``15/1s``."""
    return str(Rule(limit, window))
