"""``POST /report``: an agent's hook payload. Agents use the report socket, where the kernel names
the calling pane; over TCP a report needs that session's own report token."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from pydantic import BaseModel, Field, JsonValue

from ..access import reports
from ..engine import EngineAPI, ReportDesk
from ..errors import UnknownSession
from ..states import State
from .deps import engine_of, refusal

router = APIRouter()

REPORT_MAX_BYTES = 64 * 1024


class Accepted(BaseModel):
    """The report set the session's state (``session_state``: what it is after it)."""

    accepted: Literal[True]
    state: State
    event: str
    session_state: State


class Ignored(BaseModel):
    """The report's event is not one the state is read from (kept, not used)."""

    accepted: Literal[False]
    reason: str
    event: JsonValue = Field(description="the payload's hook_event_name, as it came")


def taker(desk: ReportDesk) -> Callable[[str, bytes], tuple[int, dict[str, Any]]]:
    """(session id, body) → (status, answer) for an authorised caller: the report socket's handler
    and this route's, so both parse, clean and refuse alike."""

    def take(sid: str, body: bytes) -> tuple[int, dict[str, Any]]:
        return reports.take_report(sid, body, desk.report, desk.state_of, gone=(UnknownSession,))

    return take


@router.post("/report", status_code=202, tags=["hooks"])
async def report(
    request: Request, engine: Annotated[EngineAPI, Depends(engine_of)], session: Annotated[str | None, Query()] = None
) -> Accepted | Ignored:
    """A Claude Code hook payload, or ``{"state": ...}``, with the session's report token. Agents use
    the report socket instead (``$PANEWATCH_REPORT_SOCKET``): there the kernel says which pane calls."""
    refused = refusal(request)  # the guard checked it already; an app mounted without it must too
    if refused is not None:
        raise HTTPException(refused[0], refused[1], headers=refused[2] or None)
    sid = session or request.headers.get("x-panewatch-session") or ""
    status, answer = taker(engine.reports)(sid, await request.body())
    if status != 202:
        raise HTTPException(status, answer["detail"])
    return Accepted.model_validate(answer) if answer["accepted"] else Ignored.model_validate(answer)
