"""The replay figures as a picture: CPU, state-change p99 and event-loop lag p99 against pane
count, one line per backend and mode, with the replay driver's own CPU as the baseline line.

matplotlib is optional (the lab's ``plot`` extra); without it nothing is drawn and the caller
says so. ``python -m panewatch_lab.bench_plot figures.json out.png`` redraws from a saved run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from .eval_plot import available

STYLE = {
    ("ghostty", "change"): ("#1f77b4", "-"),
    ("ghostty", "sweep"): ("#1f77b4", "--"),
    ("pyte", "change"): ("#d62728", "-"),
    ("pyte", "sweep"): ("#d62728", "--"),
}


def plot_replay(rows: list[dict[str, Any]], path: Path, title: str = "") -> bool:
    """Write the PNG; False (nothing written) without matplotlib or without figures."""
    if not available() or not rows:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (cpu_ax, p99_ax, lag_ax) = plt.subplots(1, 3, figsize=(15, 4.2))
    series: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        key = ("replay driver alone", "") if r["driver_only"] else (r["backend"], r["mode"])
        series.setdefault(key, []).append(r)
    for key, rs in sorted(series.items()):
        rs = sorted(rs, key=lambda r: r["panes"])
        x = [r["panes"] for r in rs]
        colour, line = STYLE.get(key, ("#7f7f7f", ":"))
        label = key[0] if not key[1] else f"{key[0]}, {key[1]} mode"
        cpu_ax.plot(x, [r["cpu"] * 100 for r in rs], line, color=colour, marker="o", label=label)
        if key[1]:
            p99_ax.plot(x, [r["change_p99"] * 1000 for r in rs], line, color=colour, marker="o", label=label)
            lag_ax.plot(x, [r["lag_p99"] * 1000 for r in rs], line, color=colour, marker="o", label=label)
    cpu_ax.axhline(50, color="#2ca02c", lw=0.8, ls=":", label="target at 1,000 panes (50 %)")
    cpu_ax.set(xlabel="panes replaying real captures", ylabel="CPU (% of one core)", title="server CPU")
    p99_ax.axhline(150, color="#2ca02c", lw=0.8, ls=":", label="target (150 ms)")
    p99_ax.set(xlabel="panes replaying real captures", ylabel="ms (log scale)", title="state change p99")
    p99_ax.set_yscale("log")
    lag_ax.axhline(20, color="#2ca02c", lw=0.8, ls=":", label="target (20 ms)")
    lag_ax.set(xlabel="panes replaying real captures", ylabel="ms (log scale)", title="event-loop lag p99")
    lag_ax.set_yscale("log")
    for ax in (cpu_ax, p99_ax, lag_ax):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2:
        print("usage: python -m panewatch_lab.bench_plot FIGURES.json OUT.png [TITLE]", file=sys.stderr)
        return 2
    figures = json.loads(Path(args[0]).read_text())
    if not plot_replay(figures.get("replay", []), Path(args[1]), args[2] if len(args) > 2 else ""):
        print("nothing drawn: matplotlib missing (pip install './lab[plot]') or no replay figures", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
