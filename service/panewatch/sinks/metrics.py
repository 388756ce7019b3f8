"""``/metrics`` in the Prometheus text exposition format (version 0.0.4), written by hand.

Why by hand: the engine already keeps every figure; the format is a few lines of text, and a
client library would only keep second copies of the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from ..engine.models import EngineStats

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


def exposition(stats: EngineStats, version: str) -> str:
    """Every figure of ``Engine.stats()``; counters include deleted sessions so they never go down."""
    recent = sorted(stats.sweep_seconds)
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
        [("panewatch_sessions", {"state": k}, v) for k, v in stats.sessions_by_state.items()],
    )
    lines += family(
        "panewatch_state_transitions_total",
        "counter",
        "State changes, by the signal that decided them.",
        [("panewatch_state_transitions_total", {"source": k}, v) for k, v in sorted(stats.transitions.items())],
    )
    lines += family(
        "panewatch_sweep_duration_seconds",
        "summary",
        "Time one classification sweep took (quantiles over the recent sweeps).",
        [
            *(("panewatch_sweep_duration_seconds", {"quantile": str(q)}, quantile(recent, q)) for q in QUANTILES),
            ("panewatch_sweep_duration_seconds_sum", {}, stats.sweep_seconds_sum),
            ("panewatch_sweep_duration_seconds_count", {}, stats.sweeps),
        ],
    )
    for name, help_text, key in COUNTERS:
        lines += family(name, "counter", help_text, [(name, {}, getattr(stats, key))])
    return "\n".join(lines) + "\n"


#: Web Push counters: (metric, help, key of ``Pusher.counts``).
PUSH_COUNTERS = (
    ("panewatch_push_sent_total", "Pushes a push service accepted.", "sent"),
    ("panewatch_push_failed_total", "Pushes that failed after their retries (or could not be made).", "failed"),
    ("panewatch_push_retries_total", "Push requests sent again after a 429, a 5xx or a network error.", "retried"),
    ("panewatch_push_removed_total", "Subscriptions removed because the push service said 404/410.", "removed"),
    ("panewatch_push_suppressed_total", "Pushes held because that device showed the session right then.", "suppressed"),
    (
        "panewatch_push_escalations_total",
        "Steps of the escalation chain taken for unacknowledged prompts.",
        "escalated",
    ),
    ("panewatch_push_receipts_total", "Receipts the service workers posted (shown, clicked, acted on).", "receipts"),
)


def push_exposition(counts: Mapping[str, int], devices: Iterable[Mapping[str, Any]]) -> str:
    """Web Push, per device (last sent, last receipt, pushes without receipt) and in total: a
    device that stopped receiving shows here as a growing ``without_receipt``."""
    devices = list(devices)
    lines: list[str] = []

    def per_device(key: str) -> list[Sample]:
        return [
            (
                f"panewatch_push_{key}",
                {"device": d["device"], "name": d["name"]},
                d[key] if d[key] is not None else math.nan,
            )
            for d in devices
        ]

    lines += family(
        "panewatch_push_last_sent",
        "gauge",
        "Wall-clock time of the last push accepted, per device.",
        per_device("last_sent"),
    )
    lines += family(
        "panewatch_push_last_receipt",
        "gauge",
        "Wall-clock time of the last receipt, per device.",
        per_device("last_receipt"),
    )
    lines += family(
        "panewatch_push_without_receipt",
        "gauge",
        "Pushes sent to a device since its last receipt (3 or more: not receiving).",
        per_device("without_receipt"),
    )
    for name, help_text, key in PUSH_COUNTERS:
        lines += family(name, "counter", help_text, [(name, {}, counts.get(key, 0))])
    return "\n".join(lines) + "\n"


def policy_exposition(counts: Mapping[str, int]) -> str:
    """The approval policy's decisions since start, by action (allow, deny, ask, suggest)."""
    samples: list[Sample] = [("panewatch_policy_decisions_total", {"action": a}, n) for a, n in sorted(counts.items())]
    return (
        "\n".join(family("panewatch_policy_decisions", "counter", "Approval policy decisions, by action.", samples))
        + "\n"
    )
