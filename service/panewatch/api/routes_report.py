"""``POST /report``: an agent's hook payload, authorised by the session's own token."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request

from ..auth import presented_token
from ..engine import Engine
from .deps import engine_of

router = APIRouter()

REPORT_MAX_BYTES = 64 * 1024


async def _json_body(request: Request) -> dict[str, Any]:
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > REPORT_MAX_BYTES:
        raise HTTPException(413, f"report larger than {REPORT_MAX_BYTES} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > REPORT_MAX_BYTES:
            raise HTTPException(413, f"report larger than {REPORT_MAX_BYTES} bytes")
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise HTTPException(422, "the body is not JSON") from None
    if not isinstance(payload, dict):
        raise HTTPException(422, "the body must be a JSON object")
    return payload


@router.post("/report", status_code=202, tags=["hooks"])
async def report(request: Request, engine: Annotated[Engine, Depends(engine_of)],
                 session: Annotated[str | None, Query()] = None) -> dict[str, Any]:
    """A Claude Code hook payload, or ``{"state": ...}``, authorised by the session's own token."""
    presented = presented_token(request)
    if presented is None:
        raise HTTPException(401, "missing report token (Authorization: Bearer $PANEWATCH_REPORT_TOKEN)",
                            headers={"WWW-Authenticate": "Bearer"})
    sid = session or request.headers.get("x-panewatch-session")
    if not sid:
        raise HTTPException(422, "name the session: ?session=$PANEWATCH_SESSION")
    if not engine.report_token_matches(sid, presented):
        raise HTTPException(403, "wrong report token for this session")
    payload = await _json_body(request)
    result = engine.report(sid, payload)
    if result is None:
        return {"accepted": False, "reason": "event not used for state", "event": payload.get("hook_event_name")}
    return {"accepted": True, "state": result.state, "event": result.event,
            "session_state": engine.get(sid)["state"]}
