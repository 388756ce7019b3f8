"""The shape of an agent integration, and the one report format every agent may send."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any, Protocol

from ..errors import InvalidRequest
from ..signals import Report
from ..states import RULE_STATES, State


class UnknownPayload(InvalidRequest):
    """Neither a hook payload the integration knows nor a ``{"state": ...}`` report."""


class Integration(Protocol):
    name: str

    def launch_args(self, argv: Sequence[str], processes: Sequence[str]) -> list[str]:
        """Arguments to add to ``argv`` (whose program is one of the manifest's ``processes``)."""

    def interpret(self, payload: Mapping[str, Any], now: float, memo: MutableMapping[str, Any]) -> Report | None:
        """The report a hook payload makes (None: not about the pane's state, ignore it).
        ``memo`` is this session's own scratch space for rules that span payloads."""


def plain_report(payload: Mapping[str, Any], now: float) -> Report:
    """``{"state": "blocked"|"working"|"idle", "detail": ...}`` from any tool or script."""
    state = payload["state"]
    if state not in RULE_STATES:
        raise UnknownPayload(f"state must be blocked, working or idle, not {state!r}")
    detail = str(payload.get("detail") or payload.get("message") or "")[:200]
    return Report(State(state), "report", now, detail)


def is_plain(payload: Mapping[str, Any]) -> bool:
    return "state" in payload and "hook_event_name" not in payload
