"""Scoring a "needs you" detector against the agent's true states: the seed's table, as code.

Everything here is pure arithmetic on step functions (a value that holds from its time until
the next change), so it is unit-tested on synthetic timelines whose right answers are known,
and the same functions score a live run and a re-read raw log.

Definitions (the seed's, made exact):

* a **prompt** is one interval the truth says ``blocked``, from "prompt drawn" to "answered";
* **latency** is from the prompt's start to the first moment the detector says "needs you";
  a detector silent for the whole interval **missed** it. It is negative when the detector
  said so up to ``tolerance`` seconds *before* the prompt was drawn and kept saying it into the
  prompt (the real CLI's ``PermissionRequest`` hook fires just before the dialog is drawn;
  the fake's bytes reach the reader a moment before its truth record is written), and 0 when
  the detector was already saying it earlier than that (the earlier part is a false alarm);
* **persistence** is how long the detector went on saying "needs you" without a break after the
  prompt's end (the answer). Averaged over the prompts it caught; it may run past later prompts;
* a **false alarm** is the rest of the time the detector says "needs you" while the truth says
  ``working`` or ``idle``: one episode per truth segment it touches, with its total seconds.
  Persistence is not a false alarm (it is scored in its own column), and neither is the early
  lead described above.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Seconds before a prompt's recorded start in which a "needs you" still counts as that prompt.
EARLY_TOLERANCE = 0.25
_EPS = 1e-9

Interval = tuple[float, float]


@dataclass(frozen=True)
class Segment:
    """A stretch of time with one true state."""

    start: float
    end: float
    state: str

    @property
    def seconds(self) -> float:
        return self.end - self.start


def segments(changes: Iterable[tuple[float, Any]], end: float) -> list[Segment]:
    """A step function ``[(time, value), ...]`` as consecutive segments, merged, up to ``end``.

    Changes must be in time order; a repeated value extends the current segment.
    """
    out: list[Segment] = []
    items = [(t, v) for t, v in changes if t < end]
    for i, (t, value) in enumerate(items):
        stop = items[i + 1][0] if i + 1 < len(items) else end
        if stop - t <= _EPS:
            continue
        if out and out[-1].state == value and abs(out[-1].end - t) <= _EPS:
            out[-1] = Segment(out[-1].start, stop, value)
        else:
            out.append(Segment(t, stop, value))
    return out


def positive_runs(changes: Iterable[tuple[float, bool]], end: float) -> list[Interval]:
    """The intervals during which a boolean step function is true."""
    return [(s.start, s.end) for s in segments(changes, end) if s.state is True]


@dataclass(frozen=True)
class PromptResult:
    start: float
    end: float
    latency: float | None  # None: missed
    persistence: float  # 0 when the detector was silent at the answer


@dataclass(frozen=True)
class Alarm:
    start: float
    end: float
    state: str  # the true state while it went off: working or idle

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass
class Score:
    """One detector's row of the table."""

    prompts: list[PromptResult] = field(default_factory=list)
    alarms: list[Alarm] = field(default_factory=list)
    early: list[Interval] = field(default_factory=list)  # forgiven slivers before a prompt

    @property
    def caught(self) -> list[PromptResult]:
        return [p for p in self.prompts if p.latency is not None]

    @property
    def missed(self) -> int:
        return len(self.prompts) - len(self.caught)

    @property
    def median_latency(self) -> float | None:
        caught = self.caught
        return statistics.median(p.latency for p in caught if p.latency is not None) if caught else None

    @property
    def max_latency(self) -> float | None:
        caught = self.caught
        return max(p.latency for p in caught if p.latency is not None) if caught else None

    @property
    def mean_persistence(self) -> float | None:
        caught = self.caught
        return statistics.fmean(p.persistence for p in caught) if caught else None

    @property
    def max_persistence(self) -> float | None:
        caught = self.caught
        return max(p.persistence for p in caught) if caught else None

    def false_alarms(self, state: str) -> tuple[int, float]:
        """(episodes, total seconds) of false alarms while the truth was ``state``."""
        mine = [a for a in self.alarms if a.state == state]
        return len(mine), sum(a.seconds for a in mine)


def _subtract(run: Interval, holes: Sequence[Interval]) -> list[Interval]:
    """``run`` minus every interval in ``holes`` (sorted, disjoint)."""
    pieces, cursor = [], run[0]
    for h0, h1 in holes:
        if h1 <= cursor or h0 >= run[1]:
            continue
        if h0 > cursor:
            pieces.append((cursor, h0))
        cursor = max(cursor, h1)
    if cursor < run[1]:
        pieces.append((cursor, run[1]))
    return [p for p in pieces if p[1] - p[0] > _EPS]


def score(truth: Sequence[Segment], runs: Sequence[Interval], tolerance: float = EARLY_TOLERANCE) -> Score:
    """Score a detector's "needs you" intervals against true segments (see the module docstring)."""
    result = Score()
    blocked = [(s.start, s.end) for s in truth if s.state == "blocked"]
    for b0, b1 in blocked:
        hits = [r for r in runs if r[0] < b1 - _EPS and r[1] > b0 + _EPS]
        if not hits:
            result.prompts.append(PromptResult(b0, b1, None, 0.0))
            continue
        first = hits[0][0]
        latency = first - b0 if first >= b0 - tolerance - _EPS else 0.0
        over = [r for r in runs if r[0] < b1 - _EPS and r[1] > b1 + _EPS]
        persistence = over[0][1] - b1 if over else 0.0
        result.prompts.append(PromptResult(b0, b1, latency, persistence))
    for run in runs:
        for p0, p1 in _subtract(run, blocked):
            if run[0] < p0 - _EPS and any(abs(p0 - b1) <= _EPS for _, b1 in blocked):
                continue  # went on from inside a prompt past its answer: persistence
            if p1 - p0 <= tolerance + _EPS and run[1] > p1 + _EPS and any(abs(p1 - b0) <= _EPS for b0, _ in blocked):
                result.early.append((p0, p1))
                continue
            for seg in truth:
                if seg.state == "blocked":
                    continue
                lo, hi = max(p0, seg.start), min(p1, seg.end)
                if hi - lo > _EPS:
                    result.alarms.append(Alarm(lo, hi, seg.state))
    return result
