"""The admin commands of the ``ratekeeper`` tool: block, unblock, safelist,
unsafelist, list, inspect, release-lease, set-tier, set-override,
clear-override, switch, history, top.

Every command takes ``--store URL`` (default ``$RATEKEEPER_STORE`` or
``redis://127.0.0.1:6379/0``), ``--prefix`` (default ``$RATEKEEPER_PREFIX``
or ``rk``: the limiters' prefix), ``--actor`` and ``--json``. Every change
is recorded in the store's audit trail, with ``--reason``, as made by
``--actor NAME``, else ``$RATEKEEPER_ACTOR``, else the OS user (``$USER``);
``history`` reads it back. Exit codes: 0 done, 1 the store failed, 2 bad arguments, 3
not found (unblock or unsafelist of a target that is not listed, release-lease
of a lease not held).
"""

import argparse
import datetime
import getpass
import json
import os
import sys
import time
from typing import Any, Callable, Dict, List, Optional

from ratekeeper._ratekeeper import Admin, ConfigurationError, Limiter, StorageError

OK, FAILED, USAGE, NOT_FOUND = 0, 1, 2, 3

Action = Callable[[Admin, argparse.Namespace], Any]


def time_left(seconds: float) -> str:
    """``seconds`` as its two largest units, e.g. "59m 59s", "6d 23h"."""
    whole = max(0, int(seconds))
    parts: List[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, whole = divmod(whole, size)
        if count or parts:
            parts.append(f"{count}{unit}")
    return " ".join(parts[:2]) or "0s"


def _left(expires_at: Optional[float]) -> str:
    return "-" if expires_at is None else time_left(expires_at - time.time())


def store_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds the options that name the store as the limiters use it: --store,
    --prefix and --redis-module."""
    parser.add_argument("--store", default=os.environ.get("RATEKEEPER_STORE", "redis://127.0.0.1:6379/0"),
                        help="the store URL (default: $RATEKEEPER_STORE or redis://127.0.0.1:6379/0)")
    parser.add_argument("--prefix", default=os.environ.get("RATEKEEPER_PREFIX", "rk"),
                        help="the limiters' key prefix (default: $RATEKEEPER_PREFIX or rk)")
    parser.add_argument("--redis-module", metavar="auto|off|require",
                        default=os.environ.get("RATEKEEPER_REDIS_MODULE", "auto"),
                        help="check through the ratekeeper Redis module: auto (when loaded, the default), "
                             "off (the Lua script) or require (default: $RATEKEEPER_REDIS_MODULE or auto)")


def printable(text: Any) -> str:
    """``text`` with every character that is not printable (newlines, escape
    sequences, bidi controls) written as its Python escape, so a key or reason
    cannot forge rows or drive the terminal. JSON output stays exact."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def os_user() -> str:
    """The OS user running the command: who its changes are recorded as."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a bare container)
        return f"uid {os.getuid()}"


def actor(given: Optional[str]) -> str:
    """Who a command's changes are recorded as: ``given`` (``--actor``), else
    ``$RATEKEEPER_ACTOR`` (a wrapper that knows who asked), else the OS user."""
    return given or os.environ.get("RATEKEEPER_ACTOR") or os_user()


def utc(at: float) -> str:
    """Epoch seconds as ``2026-11-25T14:28:13Z``."""
    return datetime.datetime.fromtimestamp(at, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _table(header: List[str], rows: List[List[str]]) -> str:
    """Rows under a header, columns aligned, the last one as it is."""
    width = [max(len(r[i]) for r in rows + [header]) for i in range(len(header) - 1)]
    return "\n".join("  ".join(f"{cell:<{width[i]}}" if i < len(width) else cell for i, cell in enumerate(row))
                     for row in [header, *rows])


def _show_top(top: Dict[str, Any]) -> str:
    """Who is limited now, as text: the networks, addresses and keys most
    denied over the window, and the denials of each minute. A key hashed
    (over 128 bytes, holding braces) or not UTF-8 shows its stored form as
    its TAG, which ``--tag`` takes to act on the very key."""
    out = [f"Denials over the last {time_left(top['window'])}, per minute (oldest first): "
           + " ".join(str(m["count"]) for m in top["per_minute"])]
    for title, rows, name in (("Networks", top["networks"], "network"), ("Addresses", top["addresses"], "address"),
                              ("Keys", top["keys"], "key")):
        out.append("")
        if not rows:
            out.append(f"{title}: none denied")
            continue
        header = ["DENIED", "SCOPE", name.upper()]
        cells = [[f"{r['count']:,}", printable(r["scope"] or "-"), printable(r[name])] for r in rows]
        tagged = [r.get("tag") if (r.get("tag") or "").startswith("#") else None for r in rows]
        if any(tagged):
            header.append("TAG")
            for row, tag in zip(cells, tagged):
                row.append(printable(tag or "-"))
        out.append(_table(header, cells))
        if any(tagged):
            out.append("(act on a key by its TAG: ratekeeper block --tag TAG, inspect --tag, unblock --tag)")
    return "\n".join(out)


def _show(value: Any) -> str:
    """A result as plain text, every stored text made printable."""
    if isinstance(value, dict) and "per_minute" in value:
        return _show_top(value)
    if isinstance(value, list) and value and "action" in value[0]:
        return _table(["WHEN", "WHO", "ACTION", "TARGET", "SCOPE", "DETAIL", "REASON"],
                      [[utc(c["at"]), printable(c["actor"] or "-"), c["action"], printable(c["target"] or "-"),
                        printable(c["scope"] or "-"), printable(c["detail"]), printable(c["reason"] or "-")]
                       for c in value])
    if isinstance(value, list):
        if not value:
            return "nothing listed"
        rows = [(e["kind"], printable(e["target"]), printable(e.get("scope") or "-"), _left(e["expires_at"]),
                 printable(e["detail"])) for e in value]
        header = ("KIND", "TARGET", "SCOPE", "LEFT", "DETAIL")
        width = [max(len(r[i]) for r in rows + [header]) for i in range(4)]
        lines = ["  ".join(f"{cell:<{width[i]}}" if i < 4 else cell for i, cell in enumerate(row))
                 for row in [header, *rows]]
        return "\n".join(lines)
    if isinstance(value, dict):
        out = []
        for name, item in value.items():
            if isinstance(item, dict):
                item = ", ".join(f"{k}={_left(v) + ' left' if k == 'expires_at' else printable(v)}"
                                 for k, v in item.items())
            elif isinstance(item, list) and name == "leases":  # a key's leases: id, since when, lapsing when
                item = "; ".join(f"{printable(x['id'])} (since {utc(x['since']) if x['since'] else '-'}, "
                                 f"lapses {utc(x['lapse_at'])})" for x in item) or "none"
            elif isinstance(item, list):
                item = "; ".join(printable(x) for x in item)
            out.append(f"{name}: {'-' if item is None else printable(item)}")
        return "\n".join(out)
    return printable(value)


def _listing(which: str) -> Action:
    def act(admin: Admin, args: argparse.Namespace) -> Any:
        if which == "block":
            return admin.block(args.target, args.ttl, args.reason or "", key=args.key, force=args.force,
                               scope=args.scope, tag=args.tag)
        return admin.safelist(args.target, args.ttl, args.reason or "", key=args.key, force=args.force, tag=args.tag)

    return act


def _unlisting(which: str) -> Action:
    def act(admin: Admin, args: argparse.Namespace) -> Any:
        if which == "block":
            removed = admin.unblock(args.target, key=args.key, scope=args.scope, reason=args.reason, tag=args.tag)
        else:
            removed = admin.unsafelist(args.target, key=args.key, reason=args.reason, tag=args.tag)
        if not removed:
            where = f" in scope {printable(args.scope)}" if getattr(args, "scope", None) else ""
            raise LookupError(f"{printable(args.target)} is not on the {which}list{where}")
        return {"removed": args.target}

    return act


def _inspect(admin: Admin, args: argparse.Namespace) -> Any:
    tiers = {}
    for given in args.tier_rules or []:
        name, equals, tier_rules = given.partition("=")
        if not (name and equals and tier_rules):
            raise ConfigurationError(f"--tier-rules takes NAME=RULES, such as pro=100/minute, not {given!r}")
        tiers[name] = tier_rules
    seen = admin.inspect(args.key, scope=args.scope, tag=args.tag)
    rules = args.rules or seen["override"]
    if rules and args.tag:  # the key named by its stored form: its log, whatever its tier
        decision = admin.usage(args.key, rules, scope=args.scope, tag=True)
        seen["usage"] = [f"{r.limit}/{r.window:g}s: {r.used} used, {r.remaining} left" for r in decision.rules]
    elif rules:
        limiter = Limiter(rules, args.store, prefix=args.prefix, scope=args.scope or "", tiers=tiers or None,
                          timeout=2.0, connect_timeout=2.0, denial_cache=0.0, redis_module=args.redis_module)
        decision = limiter.peek(args.key)
        seen["usage"] = [f"{r.limit}/{r.window:g}s: {r.used} used, {r.remaining} left" for r in decision.rules]
    return seen


def _release_lease(admin: Admin, args: argparse.Namespace) -> Any:
    if not admin.release_lease(args.key, args.lease_id, scope=args.scope, reason=args.reason):
        where = f" in scope {printable(args.scope)}" if args.scope else ""
        raise LookupError(f"{printable(args.key)} holds no lease {printable(args.lease_id)}{where} "
                          "(it lapsed, or was released)")
    return {"released": args.lease_id}


def _set_tier(admin: Admin, args: argparse.Namespace) -> Any:
    admin.set_tier(args.key, args.tier, reason=args.reason)
    return {"key": args.key, "tier": args.tier}


def _set_override(admin: Admin, args: argparse.Namespace) -> Any:
    admin.set_override(args.key, args.rules, reason=args.reason)
    return {"key": args.key, "override": args.rules}


def _clear_override(admin: Admin, args: argparse.Namespace) -> Any:
    admin.set_override(args.key, None, reason=args.reason)
    return {"key": args.key, "override": None}


def _switch(admin: Admin, args: argparse.Namespace) -> Any:
    change: Dict[str, Any] = {
        "enable": {"enabled": True},
        "disable": {"enabled": False},
        "shadow": {"shadow": True},
        "unshadow": {"shadow": False},
        "status": {},
    }[args.state]
    if args.multiplier is not None:
        if args.state == "status":
            raise ConfigurationError("switch status only reads: give --multiplier with enable, disable, shadow or unshadow")
        change["multiplier"] = args.multiplier
    return admin.set_switches(**change, reason=args.reason) if change else admin.switches()


class Command:
    """One admin command: its name, help, arguments and action."""

    def __init__(self, name: str, help: str, arguments: Callable[[argparse.ArgumentParser], None], action: Action):
        self.NAME = name
        self.help = help
        self.arguments = arguments
        self.action = action

    def add_parser(self, subparsers: Any) -> argparse.ArgumentParser:
        """Adds this command's parser, with the options every admin command takes."""
        parser: argparse.ArgumentParser = subparsers.add_parser(self.NAME, help=self.help, description=self.help)
        self.arguments(parser)
        store_arguments(parser)
        parser.add_argument("--actor", metavar="NAME",
                            help="who the audit trail records the changes as (default: $RATEKEEPER_ACTOR, "
                                 "else the OS user)")
        parser.add_argument("--json", action="store_true", help="print JSON")
        parser.set_defaults(run=self.run)
        return parser

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        """Runs the command; prints the result or the error; returns the exit code."""
        try:
            if args.store.strip().lower().startswith("memory:"):
                raise ConfigurationError(
                    "--store memory:// is this command's own memory, gone when it exits: give the Redis URL "
                    "your limiters use (or set RATEKEEPER_STORE)"
                )
            admin = Admin(args.store, prefix=args.prefix, redis_module=args.redis_module, actor=actor(args.actor))
            result = self.action(admin, args)
        except (ConfigurationError, TypeError) as exc:
            parser.print_usage(sys.stderr)
            print(f"ratekeeper {self.NAME}: error: {printable(exc)}", file=sys.stderr)
            return USAGE
        except StorageError as exc:
            print(f"ratekeeper {self.NAME}: the store failed: {printable(exc)}", file=sys.stderr)
            return FAILED
        except LookupError as exc:
            print(f"ratekeeper {self.NAME}: {exc.args[0]}", file=sys.stderr)
            return NOT_FOUND
        print(json.dumps(result, indent=2, sort_keys=True) if args.json else _show(result))
        return OK


def _tag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tag", action="store_true",
                        help="the key is given by its stored form, the TAG `ratekeeper top` shows (a hashed key's "
                             "#sha1, a key not UTF-8 as #%%...): the very key it names")


def _target(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", help="a key, an IP address or a CIDR range")
    parser.add_argument("--key", action="store_true",
                        help="the target is an exact key, even if it reads as an address or a range")
    _tag(parser)


def _reason(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reason", default="", help="why (kept in the audit trail, which history prints)")


def _listing_args(parser: argparse.ArgumentParser) -> None:
    _target(parser)
    parser.add_argument("--force", action="store_true", help="allow a range wider than a /8 (IPv6: /32)")
    parser.add_argument("--ttl", type=float, default=None, help="seconds the entry lasts (default: one week)")
    parser.add_argument("--reason", default="", help="why (shown by list, inspect and history)")


def _unlisting_args(parser: argparse.ArgumentParser) -> None:
    _target(parser)
    _reason(parser)


def _ban_args(parser: argparse.ArgumentParser, adding: bool) -> None:
    (_listing_args if adding else _unlisting_args)(parser)
    parser.add_argument("--scope", help="a key banned in this scope only (a ban earned by penalize in a scoped "
                                        "limiter: Django's scope, the Rack throttle's name); default: everywhere")


def _key(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("key", help="the key, as the application checks it")


def _inspect_args(parser: argparse.ArgumentParser) -> None:
    _key(parser)
    _tag(parser)
    parser.add_argument("--rules", help="the key's configured rules, to show its usage per rule")
    parser.add_argument("--scope", help="the limiter's scope (Django: default, path:/api/...; Rack: the throttle name); "
                                        "also shows the key's ban and leases in it")
    parser.add_argument("--tier-rules", nargs="*", metavar="NAME=RULES", help="the limiter's tiers")


def _release_lease_args(parser: argparse.ArgumentParser) -> None:
    _key(parser)
    parser.add_argument("lease_id", help="the lease's id, as inspect shows it")
    parser.add_argument("--scope", help="the limiter's scope the lease is held in (default: none)")
    _reason(parser)


def _tier_args(parser: argparse.ArgumentParser) -> None:
    _key(parser)
    parser.add_argument("tier", help="the tier's name, as the limiters configure it")
    _reason(parser)


def _override_args(parser: argparse.ArgumentParser) -> None:
    _key(parser)
    parser.add_argument("rules", help="the key's own rules, such as '100/second; 100000/day'")
    _reason(parser)


def _clear_override_args(parser: argparse.ArgumentParser) -> None:
    _key(parser)
    _reason(parser)


def _switch_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("state", choices=["enable", "disable", "shadow", "unshadow", "status"])
    parser.add_argument("--multiplier", type=float, help="multiply configured and tier limits (1 restores them)")
    _reason(parser)


def _top_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--window", type=int, default=300,
                        help="seconds to look back (1 to 3600; default 300, the last 5 minutes)")


def _history_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=int, default=20, help="how many changes, newest first (1 to 1000; default 20)")


COMMANDS: List[Command] = [
    Command("block", "Block a key, address or range (403) for a TTL.", lambda p: _ban_args(p, True), _listing("block")),
    Command("unblock", "Remove a key, address or range from the blocklist.", lambda p: _ban_args(p, False),
            _unlisting("block")),
    Command("safelist", "Safelist a key, address or range (never limited) for a TTL.", _listing_args, _listing("safe")),
    Command("unsafelist", "Remove a key, address or range from the safelist.", _unlisting_args, _unlisting("safe")),
    Command("list", "List blocks, safelists, tiers and overrides.", lambda p: None, lambda a, args: a.entries()),
    Command("inspect", "Show a key's listings, tier, override and usage.", _inspect_args, _inspect),
    Command("release-lease", "Release a slot a key holds (a holder that hangs).", _release_lease_args,
            _release_lease),
    Command("set-tier", "Store a key's tier (used from its next check).", _tier_args, _set_tier),
    Command("set-override", "Store a key's own rules (used from its next check).", _override_args, _set_override),
    Command("clear-override", "Remove a key's override: its configured rules apply again.", _clear_override_args,
            _clear_override),
    Command("switch", "Enable, disable or shadow limiting everywhere; scale limits.", _switch_args, _switch),
    Command("history", "Show who changed what, when and why (newest first).", _history_args,
            lambda a, args: a.history(args.limit)),
    Command("top", "Show who is limited now: the most denied networks, addresses and keys.", _top_args,
            lambda a, args: a.top_denied(args.window)),
]
