"""The timeline picture: truth against every detector, one band per row, in slices of time.

matplotlib is optional (``pip install './lab[plot]'``, the lab's ``plot`` extra); without it ``plot`` says so and the
Markdown is written all the same.
"""

from __future__ import annotations

import math
from pathlib import Path

from .eval_analysis import Analysis

COLOURS = {"blocked": "#d62728", "working": "#7f9fcf", "idle": "#d9d9d9", "needs": "#d62728"}
SLICE_S = 120.0


def available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def plot(a: Analysis, path: Path, title: str, slice_s: float = SLICE_S) -> bool:
    """Write the PNG; False (and nothing written) when matplotlib is missing."""
    if not available():
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    span = a.end - a.start
    slices = max(1, math.ceil(span / slice_s - 1e-9))
    slice_len = min(slice_s, span) if slices == 1 else slice_s
    bands: list[tuple[str, list[tuple[float, float, str]]]] = [("truth", [(s.start, s.end, s.state) for s in a.truth])]
    for row in a.rows:
        label = row.info.short or row.info.label
        if row.info.kind == "state":
            bands.append((label, [(s.start, s.end, s.state) for s in row.states]))
        else:
            bands.append((label, [(s, e, "needs") for s, e in row.runs]))
    hooks = [r["t"] for r in a.records if r["k"] == "hook"]
    height = 0.28 * len(bands) + 0.6
    fig, axes = plt.subplots(slices, 1, figsize=(16, height * slices + 0.8), squeeze=False)
    for i, ax in enumerate(axes[:, 0]):
        lo = a.start + i * slice_len
        hi = lo + slice_len
        for y, (_, spans) in enumerate(bands):
            for s, e, state in spans:
                s, e = max(s, lo), min(e, hi)
                if e > s:
                    ax.broken_barh(
                        [(s - a.start, e - s)],
                        (len(bands) - 1 - y - 0.4, 0.8),
                        facecolors=COLOURS.get(state, "#999999"),
                        linewidth=0,
                    )
        for t in hooks:
            if lo <= t < hi:
                ax.axvline(t - a.start, color="#2ca02c", linewidth=0.6, alpha=0.7)
        ax.set_xlim(lo - a.start, hi - a.start)
        ax.set_ylim(-0.6, len(bands) - 0.4)
        ax.set_yticks(range(len(bands)))
        ax.set_yticklabels([name for name, _ in reversed(bands)], fontsize=7)
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(axis="x", linewidth=0.3, alpha=0.5)
    axes[-1, 0].set_xlabel("seconds since the agent first went idle", fontsize=8)
    legend = [
        Patch(color=COLOURS["blocked"], label="blocked / needs you"),
        Patch(color=COLOURS["working"], label="working"),
        Patch(color=COLOURS["idle"], label="idle"),
    ]
    if hooks:
        legend.append(Patch(color="#2ca02c", label="hook report"))
    fig.legend(handles=legend, loc="upper right", fontsize=8, ncol=len(legend))
    fig.suptitle(title, fontsize=10, x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.5 / (height * slices + 0.8)))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True
