"""The report: nearest-rank percentiles of the per-user peaks, suggested
limits, the JSON report of a replay and its rendering as text."""

import argparse
import datetime
import math
from typing import Any, Dict, List, Optional, Sequence

from ratekeeper.cli.analyze.rules import rule_name, window_name

SUGGEST_FACTOR = 3
QUANTILES = (("p50", 1, 2), ("p99", 99, 100), ("p99_9", 999, 1000))
"""Name, numerator, denominator: nearest-rank percentiles in exact integer arithmetic."""


# ---------------------------------------------------------------------------
# Statistics


def percentile(ascending: Sequence[int], numerator: int, denominator: int) -> Optional[int]:
    """Nearest-rank percentile: the smallest value that at least
    numerator/denominator of the values do not exceed (None if there are none)."""
    if not ascending:
        return None
    rank = -(-len(ascending) * numerator // denominator)
    return ascending[max(rank, 1) - 1]


def suggested_limit(p99_9: Optional[int], peak_limit: int) -> Optional[int]:
    """ceil(3 x the p99.9 peak), from 1 up to the core's largest limit."""
    return None if p99_9 is None else min(max(math.ceil(SUGGEST_FACTOR * p99_9), 1), peak_limit)


def window_stats(window: float, ascending: Sequence[int], peak_limit: int) -> Dict[str, Any]:
    """Percentiles, maximum and suggested limit of the per-user peaks in ``window``."""
    stats: Dict[str, Any] = {"window": window_name(window), "window_seconds": window}
    for name, numerator, denominator in QUANTILES:
        stats[name] = percentile(ascending, numerator, denominator)
    stats["max"] = ascending[-1] if ascending else None
    stats["suggested_limit"] = suggested_limit(stats["p99_9"], peak_limit)
    return stats


def share(part: int, whole: int) -> float:
    """``part`` as a percentage of ``whole`` (0 when ``whole`` is 0)."""
    return round(100.0 * part / whole, 4) if whole else 0.0


# ---------------------------------------------------------------------------
# The JSON report


def candidate_report(
    candidate: Dict[str, Any], replayed: Dict[str, Any], stats_by_window: Dict[float, Dict[str, Any]]
) -> Dict[str, Any]:
    """The JSON report of one candidate rule set, from the core's counts of it."""
    windows = [dict(stats_by_window[window], limit=limit) for limit, window in candidate["rule_list"]]
    suggested = [rule_name(w["suggested_limit"], w["window_seconds"]) for w in windows if w["suggested_limit"]]
    return {
        "rules": candidate["rules"],
        "denied_requests": candidate["denied_requests"],
        "denied_requests_pct": share(candidate["denied_requests"], replayed["requests"]),
        "users_affected": candidate["users_affected"],
        "users_affected_pct": share(candidate["users_affected"], replayed["users"]),
        "user_periods_affected": candidate["user_periods_affected"],
        "user_periods_affected_pct": share(candidate["user_periods_affected"], replayed["user_periods"]),
        "windows": windows,
        "suggested_rules": "; ".join(suggested) or None,
    }


def iso_time(timestamp: Optional[float]) -> Optional[str]:
    """``2024-03-05T10:00:00Z`` (None for no time)."""
    if timestamp is None or not math.isfinite(timestamp):
        return None
    moment = datetime.datetime.fromtimestamp(timestamp, datetime.timezone.utc)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def build_report(path: str, args: argparse.Namespace, replayed: Dict[str, Any]) -> Dict[str, Any]:
    """The whole report, as printed by ``--json``, from the core's replay."""
    peak_limit = replayed["peak_limit"]
    stats = [window_stats(w, ascending, peak_limit) for w, ascending in zip(replayed["windows"], replayed["peaks"])]
    stats_by_window = dict(zip(replayed["windows"], stats))
    return {
        "file": path,
        "format": replayed["format"],
        "gzip": replayed["gzip"],
        "key": args.key,
        "period": args.period,
        "lines": replayed["lines"],
        "requests": replayed["requests"],
        "unkeyed_lines": replayed["unkeyed_lines"],
        "late_lines": replayed["late_lines"],
        "bad_lines": replayed["bad_lines"],
        "bad_line_examples": replayed["bad_line_examples"],
        "first_time": iso_time(replayed["first_time"]),
        "last_time": iso_time(replayed["last_time"]),
        "users": replayed["users"],
        "user_periods": replayed["user_periods"],
        "windows": stats,
        "candidates": [candidate_report(c, replayed, stats_by_window) for c in replayed["candidates"]],
    }


# ---------------------------------------------------------------------------
# The text report


def count_pct(count: int, pct: float) -> str:
    """``"1,234 (5.6%)"``."""
    shown = "<0.1" if 0 < pct < 0.05 else f"{pct:.1f}"
    return f"{count:,} ({shown}%)"


def _table(rows: List[List[str]], right_from: int = 1) -> List[str]:
    """Rows as aligned text lines: the first ``right_from`` columns to the left, the rest to the right."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            cell.ljust(w) if i < right_from else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))
        ).rstrip()
        for row in rows
    ]


def render_text(report: Dict[str, Any], reorder_seconds: float) -> str:
    """The report as a readable table (lines further than ``reorder_seconds``
    out of order are said to be)."""
    unit = "user-" + report["period"] + "s"
    kind = {"clf": "common/combined log format", "json": "JSON lines"}[report["format"]]
    out = [
        f"{report['file']}: {kind}{', gzip' if report['gzip'] else ''}; key: {report['key']}",
        f"  {report['lines']:,} lines: {report['requests']:,} requests replayed, "
        f"{report['unkeyed_lines']:,} without a key, {report['bad_lines']:,} bad"
        + (f", {report['late_lines']:,} more than {reorder_seconds:g} s out of order" if report["late_lines"] else ""),
    ]
    for example in report["bad_line_examples"]:
        out.append(f"    line {example['line']}: {example['reason']}: {example['text'][:80]!r}")
    if report["first_time"]:
        out.append(f"  from {report['first_time']} to {report['last_time']}")
    out.append(f"  {report['users']:,} users, {report['user_periods']:,} {unit} (UTC)")
    out += ["", "Would be denied:"]
    rows = [["  rules", "requests", "users", unit]]
    for i, c in enumerate(report["candidates"]):
        label = "  " + c["rules"] + ("  (--rules)" if i == 0 else "")
        rows.append(
            [
                label,
                count_pct(c["denied_requests"], c["denied_requests_pct"]),
                count_pct(c["users_affected"], c["users_affected_pct"]),
                count_pct(c["user_periods_affected"], c["user_periods_affected_pct"]),
            ]
        )
    out += _table(rows)
    out += ["", "Per-user peak requests in any sliding window:"]
    rows = [["  window", "p50", "p99", "p99.9", "max", "suggested"]]
    for w in report["windows"]:
        rows.append(["  " + w["window"]] + [_num(w[k]) for k in ("p50", "p99", "p99_9", "max", "suggested_limit")])
    out += _table(rows)
    out += ["", f"Suggested rules ({SUGGEST_FACTOR} x the p99.9 peak):"]
    out += _table([["  " + c["rules"], "->", c["suggested_rules"] or "-"] for c in report["candidates"]], 3)
    return "\n".join(out) + "\n"


def _num(value: Optional[int]) -> str:
    """A count with thousands separators, ``-`` for none."""
    return "-" if value is None else f"{value:,}"
