"""A hook report's body, from bytes to the engine — the same for the report socket and TCP ``/report``.

Parsed with a depth limit, reduced to what a state can carry (``validation.clean_report``) before
it enters state: a lone surrogate in a report once broke the session list for as long as the
report stayed fresh.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..integrations.base import UnknownPayload
from . import validation
from .auth import REPORT_REFUSED


def take_report(
    sid: str,
    body: bytes,
    apply: Callable[[str, dict[str, Any]], Any],
    state_of: Callable[[str], str],
    gone: tuple[type[Exception], ...] = (LookupError,),
) -> tuple[int, dict[str, Any]]:
    """(status, answer) for a report to ``sid`` whose caller is already authorised.

    ``apply(sid, payload)`` is the engine's report call (None: event not used; raises
    ``UnknownPayload``, or one of ``gone`` for a session that went away meanwhile);
    ``state_of(sid)`` the session's state after it.
    """
    try:
        payload = validation.parse_json(body)
    except validation.BadJson as exc:
        return 422, {"detail": str(exc)}
    if not isinstance(payload, dict):
        return 422, {"detail": "the body must be a JSON object"}
    payload = validation.clean_report(payload)
    try:
        result = apply(sid, payload)
    except UnknownPayload as exc:
        return 422, {"detail": validation.clean_text(str(exc))}
    except gone:
        return 403, {"detail": REPORT_REFUSED}
    if result is None:
        return 202, {"accepted": False, "reason": "event not used for state", "event": payload.get("hook_event_name")}
    return 202, {"accepted": True, "state": result.state, "event": result.event, "session_state": state_of(sid)}
