"""The ``--plot`` figure: per window, the share of users whose peak reaches
each count, with the limits marked. matplotlib is imported only when drawing."""

import os
from typing import Any, Dict, List, Sequence, Tuple


def plot_peaks(report: Dict[str, Any], peaks: List[List[int]], path: str) -> None:
    """Draws, per window, the share of users whose peak reaches each count
    (log-log), with each candidate's limit and the suggested limit marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    windows = report["windows"]
    columns = min(len(windows), 3)
    rows = -(-len(windows) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(5.2 * columns, 4.2 * rows), squeeze=False)
    for ax in axes.flat[len(windows) :]:
        ax.set_visible(False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, stats, ascending in zip(axes.flat, windows, peaks):
        _plot_window(ax, stats, ascending, report["candidates"], colors)
    name = os.path.basename(report["file"])
    figure.suptitle(
        f"{name}: per-user peak requests in any sliding window ({report['users']:,} users by {report['key']})"
    )
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _plot_window(
    ax: Any, stats: Dict[str, Any], ascending: Sequence[int], candidates: List[Dict[str, Any]], colors: List[str]
) -> None:
    """One panel: the survival curve of the peaks in one window and the limits on it."""
    from matplotlib.ticker import FuncFormatter

    ax.set_title(f"{stats['window']} window")
    ax.set_xlabel(f"peak requests in {stats['window']}")
    ax.set_ylabel("users with at least this peak")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value * 100:g}%"))
    ax.grid(True, which="major", alpha=0.3)
    if not ascending:
        return
    values, shares = survival(ascending)
    ax.step(values, shares, where="pre", color="black", linewidth=1.5, label="users")
    for i, candidate in enumerate(candidates):
        for window in candidate["windows"]:
            if window["window_seconds"] == stats["window_seconds"]:
                label = f"{candidate['rules']}{' (--rules)' if i == 0 else ''}: {window['limit']:,}"
                ax.axvline(window["limit"], color=colors[i % len(colors)], linewidth=1.5, label=label)
    suggested = stats["suggested_limit"]
    ax.axvline(suggested, color="gray", linestyle="--", linewidth=1.2, label=f"suggested: {suggested:,} (3 x p99.9)")
    ax.legend(fontsize=7, loc="lower left")


def survival(ascending: Sequence[int]) -> Tuple[List[int], List[float]]:
    """Distinct peak values and, for each, the share of users whose peak is at
    least it (which is also the share for every count between it and the value before)."""
    total = len(ascending)
    values: List[int] = []
    shares: List[float] = []
    for i, value in enumerate(ascending):
        if not values or value != values[-1]:
            values.append(value)
            shares.append((total - i) / total)
    return values, shares
