"""Who answers and how long agents wait: answers that took, by the kind of actor (a person's
device, the API token, a policy rule, a node), and the time from entering ``blocked`` to the
answer that took, overall and per session — for ``/metrics``, as a sink of the engine's events.

Why a sink of its own: the figures are about decisions (like the ledger), not the engine's
reading of screens, and the engine's stats stay its own."""

from __future__ import annotations

from collections import deque

from ..engine.events import Acted, Action, Deleted, Event, StateChanged
from ..states import State
from .metrics import QUANTILES, Sample, family, quantile

__all__ = ["AnswerFigures"]

#: Waits kept for the quantiles: overall, and per session (the newest).
KEPT, KEPT_PER_SESSION = 1000, 50


class AnswerFigures:
    """Counts and waits, bounded; fed every engine event (``Engine.subscribe``)."""

    def __init__(self) -> None:
        self.answers: dict[str, int] = {}  # actor kind -> answers that took
        self._blocked_at: dict[str, float] = {}  # session -> when its current blocked stretch began
        #: session -> how long its last blocked stretch lasted (an answer that took ends one: the
        #: state change is announced before the answer's event, both on the engine's clock)
        self._last_stretch: dict[str, float] = {}
        self._waits: deque[float] = deque(maxlen=KEPT)
        self._per_session: dict[str, deque[float]] = {}

    def on_event(self, event: Event) -> None:
        if isinstance(event, StateChanged):
            if event.state == State.blocked and event.prev != State.blocked:
                self._blocked_at[event.session] = event.at
            elif event.state != State.blocked and event.session in self._blocked_at:
                self._last_stretch[event.session] = max(0.0, event.at - self._blocked_at.pop(event.session))
        elif isinstance(event, Acted) and event.action == Action.answer and event.took:
            kind = str(event.actor.kind)
            self.answers[kind] = self.answers.get(kind, 0) + 1
            wait = self._last_stretch.pop(event.session, None)
            if wait is not None:
                self._waits.append(wait)
                self._per_session.setdefault(event.session, deque(maxlen=KEPT_PER_SESSION)).append(wait)
        elif isinstance(event, Deleted):
            for kept in (self._blocked_at, self._last_stretch, self._per_session):
                kept.pop(event.session, None)

    def exposition(self) -> str:
        """The Prometheus text of these figures (appended to ``/metrics``)."""
        answers: list[Sample] = [
            ("panewatch_answers_total", {"actor_kind": k}, n) for k, n in sorted(self.answers.items())
        ]
        waits = sorted(self._waits)
        overall: list[Sample] = [
            *(("panewatch_time_to_answer_seconds", {"quantile": str(q)}, quantile(waits, q)) for q in QUANTILES),
            ("panewatch_time_to_answer_seconds_sum", {}, sum(waits)),
            ("panewatch_time_to_answer_seconds_count", {}, len(waits)),
        ]
        per_session: list[Sample] = [
            (
                "panewatch_session_time_to_answer_seconds",
                {"session": sid, "quantile": "0.5"},
                quantile(sorted(kept), 0.5),
            )
            for sid, kept in sorted(self._per_session.items())
        ]
        lines = [
            *family("panewatch_answers", "counter", "Answers that took, by the kind of actor that gave them.", answers),
            *family(
                "panewatch_time_to_answer_seconds",
                "summary",
                f"Seconds from entering blocked to the answer that took (the newest {KEPT}).",
                overall,
            ),
            *family(
                "panewatch_session_time_to_answer_seconds",
                "gauge",
                f"Median seconds from blocked to answer, per session (its newest {KEPT_PER_SESSION}).",
                per_session,
            ),
        ]
        return "\n".join(lines) + "\n"
