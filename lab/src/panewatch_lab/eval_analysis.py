"""From a raw evaluation log to the numbers of the tables: truth, each detector's score, processes.

Pure functions of the records (``eval_log``), so a committed log re-renders its tables
(``python -m panewatch_lab.evaluate --analyze LOG``) and the tests feed synthetic ones.

Truth, per agent:

* **fake** — the agent's own side file (``truth`` records): the state it was in, written right
  after the screen showing it;
* **claude** — reconstructed from what the CLI cannot fake: ``working`` from the moment the bot's
  task was submitted (Enter written); ``blocked`` from the first moment a dialog's question
  *and* its footer are on an independent emulated screen (``watch`` records), counted only
  between a model reply that ended in ``tool_use`` (mock log) and the next model request, until
  they leave the screen (the dialog of the tool that reply asked for); ``idle`` from the moment a reply that ends the turn (``end_turn``)
  finished streaming.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .eval_detectors import DetectorInfo, detector_infos
from .eval_log import Record
from .eval_proc import StateRow, group_by_truth
from .eval_score import EARLY_TOLERANCE, Interval, Score, Segment, positive_runs, score, segments

SERVICE = DetectorInfo("service", "Panewatch service (/ws/state)", "state", "SERVICE (/ws/state)")


def needs_you(value: Any) -> bool:
    return value is True or value == "blocked"


def clip(runs: Sequence[Interval], start: float, end: float) -> list[Interval]:
    return [(max(a, start), min(b, end)) for a, b in runs if min(b, end) > max(a, start)]


def fake_truth(records: Sequence[Record]) -> list[tuple[float, str]]:
    return [(r["t"], r["v"]) for r in records if r["k"] == "truth"]


def claude_truth(records: Sequence[Record]) -> list[tuple[float, str]]:
    """The real CLI's true states from bot, mock-log and independent-screen records."""
    changes: list[tuple[float, str]] = []
    watch = [(r["t"], set(r["v"])) for r in records if r["k"] == "watch"]
    idle_seen = [r["t"] for r in records if r["k"] == "watch" and "idle" in r["v"]]
    if idle_seen:
        changes.append((idle_seen[0], "idle"))
    for r in records:
        if r["k"] == "bot" and r.get("action") == "send":
            changes.append((r["t"], "working"))
    mock = [r for r in records if r["k"] == "mock"]
    requests = [r["t"] for r in mock if r.get("event") == "request" and r.get("path") == "/v1/messages"]
    for r in mock:
        if r.get("event") != "reply" or r.get("status") != "complete" or str(r.get("step", "")).startswith("side"):
            continue
        if r.get("stop_reason") == "end_turn":
            changes.append((r["t"], "idle"))
        elif r.get("stop_reason") == "tool_use":
            wanted = {f"dialog:{tool}" for tool in r.get("tools") or []}
            later = [t for t in requests if t > r["t"]]
            until = later[0] if later else float("inf")
            shown = next((t for t, names in watch if r["t"] <= t < until and wanted & names), None)
            if shown is None:
                continue  # a tool the CLI runs without asking (Read, ls)
            gone = next((t for t, names in watch if t > shown and not wanted & names), None)
            changes.append((shown, "blocked"))
            if gone is not None:
                changes.append((gone, "working"))
    return sorted(changes)


@dataclass
class DetectorRow:
    info: DetectorInfo
    score: Score
    runs: list[Interval]
    states: list[Segment] = field(default_factory=list)  # the detector's own states, for the picture


@dataclass
class Analysis:
    meta: dict[str, Any]
    start: float
    end: float
    truth: list[Segment]
    rows: list[DetectorRow]
    proc: list[StateRow]
    records: list[Record]

    @property
    def prompts(self) -> list[Segment]:
        return [s for s in self.truth if s.state == "blocked"]

    def seconds(self, state: str) -> float:
        return sum(s.seconds for s in self.truth if s.state == state)

    def row(self, key: str) -> DetectorRow:
        return next(r for r in self.rows if r.info.key == key)


def analyze(records: Sequence[Record], tolerance: float = EARLY_TOLERANCE) -> Analysis:
    """Every table's numbers from one run's records."""
    records = sorted(records, key=lambda r: r["t"])
    meta = next((r for r in records if r["k"] == "meta"), {"k": "meta"})
    truth_changes = claude_truth(records) if meta.get("agent") == "claude" else fake_truth(records)
    if not truth_changes:
        raise ValueError("the log holds no truth")
    start = truth_changes[0][0]
    end = next((r["t"] for r in records if r["k"] == "end"), records[-1]["t"])
    truth = segments(truth_changes, end)
    sid = meta.get("session")
    infos = [SERVICE, *detector_infos(meta.get("sweep_ms", 700) / 1000, meta.get("quiet", (0.5, 1, 2, 3, 5, 8)))]
    rows = []
    for info in infos:
        if info.key == "service":
            changes = [
                (r["t"], r["v"]) for r in records if r["k"] == "service" and (sid is None or r["session"] == sid)
            ]
        else:
            changes = [(r["t"], r["v"]) for r in records if r["k"] == "det" and r["d"] == info.key]
        runs = clip(positive_runs([(t, needs_you(v)) for t, v in changes], end), start, end)
        states = [s for s in segments(changes, end) if s.end > start] if info.kind == "state" else []
        rows.append(DetectorRow(info, score(truth, runs, tolerance), runs, states))
    proc = group_by_truth([r for r in records if r["k"] == "proc"], truth)
    return Analysis(meta, start, end, truth, rows, proc, list(records))
