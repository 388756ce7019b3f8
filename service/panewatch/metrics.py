"""``/metrics`` in the Prometheus text exposition format (version 0.0.4), written by hand.

Why by hand: the engine already keeps every figure; the format is a few lines of text, and a
client library would only keep second copies of the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
QUANTILES = (0.5, 0.9, 0.99)

Sample = tuple[str, Mapping[str, str], float]


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return str(int(value)) if float(value).is_integer() and abs(value) < 2**53 else repr(float(value))


def family(name: str, kind: str, help_text: str, samples: Iterable[Sample]) -> list[str]:
    """One metric family: HELP, TYPE, then ``name{labels} value`` per sample."""
    out = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
    for sample_name, labels, value in samples:
        shown = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())
        out.append(f"{sample_name}{{{shown}}} {_number(value)}" if shown else f"{sample_name} {_number(value)}")
    return out


def quantile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank quantile of an already sorted list (NaN when empty, as Prometheus expects)."""
    if not sorted_values:
        return math.nan
    return sorted_values[min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values)) - 1))]


#: Plain counters: (metric, help, key of ``Engine.stats()``).
COUNTERS = (
    ("panewatch_pty_read_bytes_total", "Bytes read from the agents' terminals.", "bytes_read"),
    ("panewatch_emulated_bytes_total", "Bytes fed to the screen emulators.", "bytes_emulated"),
    (
        "panewatch_screen_errors_total",
        "Escape sequences the screen emulators could not apply (the pane kept going).",
        "screen_errors",
    ),
    ("panewatch_classifications_total", "Screens classified.", "classifications"),
    ("panewatch_notifications_total", "Notifications sent (blocked, turn done, agent's desktop).", "notifications"),
    (
        "panewatch_notifications_suppressed_total",
        "Agents' desktop notifications (OSC 9/99/777) dropped by the per-session bound.",
        "notifications_suppressed",
    ),
)


def exposition(stats: Mapping[str, Any], version: str) -> str:
    """Every figure of ``Engine.stats()``; counters include deleted sessions so they never go down."""
    recent = sorted(stats["sweep_seconds"])
    lines: list[str] = []
    lines += family(
        "panewatch_build_info",
        "gauge",
        "Version of the running service.",
        [("panewatch_build_info", {"version": version}, 1)],
    )
    lines += family(
        "panewatch_sessions",
        "gauge",
        "Sessions by current state.",
        [("panewatch_sessions", {"state": k}, v) for k, v in stats["sessions_by_state"].items()],
    )
    lines += family(
        "panewatch_state_transitions_total",
        "counter",
        "State changes, by the signal that decided them.",
        [("panewatch_state_transitions_total", {"source": k}, v) for k, v in sorted(stats["transitions"].items())],
    )
    lines += family(
        "panewatch_sweep_duration_seconds",
        "summary",
        "Time one classification sweep took (quantiles over the recent sweeps).",
        [
            *(("panewatch_sweep_duration_seconds", {"quantile": str(q)}, quantile(recent, q)) for q in QUANTILES),
            ("panewatch_sweep_duration_seconds_sum", {}, stats["sweep_seconds_sum"]),
            ("panewatch_sweep_duration_seconds_count", {}, stats["sweeps"]),
        ],
    )
    for name, help_text, key in COUNTERS:
        lines += family(name, "counter", help_text, [(name, {}, stats[key])])
    return "\n".join(lines) + "\n"
