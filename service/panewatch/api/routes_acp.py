"""ACP sessions' own routes: cancel a turn, and the conversation (JSON and its WebSocket).

Prompts and answers use the common ``/send`` and ``/answer``; these are what a terminal has
no equivalent of.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, WebSocket

from ..engine import Actor, Cancelled, ConversationView, EngineAPI
from ..errors import PanewatchError
from .deps import actor_of, engine_of, require_token, ws_admit
from .routes_ws import run_until_closed

router = APIRouter()
E = Annotated[EngineAPI, Depends(engine_of)]


@router.post(
    "/api/sessions/{sid}/cancel",
    tags=["writes"],
    dependencies=[Depends(require_token)],
    responses={409: {"description": "no turn is running"}, 422: {"description": "not an ACP session"}},
)
async def cancel(sid: str, engine: E, actor: Annotated[Actor, Depends(actor_of)]) -> Cancelled:
    """Cancel the running turn of an ACP session (``session/cancel``)."""
    return await engine.cancel(sid, actor=actor)


@router.get("/api/sessions/{sid}/conversation", tags=["screens"], dependencies=[Depends(require_token)])
async def conversation(sid: str, engine: E) -> ConversationView:
    """An ACP session's messages, tool calls, plan and pending permission."""
    return await engine.conversation(sid)


@router.websocket("/ws/sessions/{sid}/conversation")
async def ws_conversation(ws: WebSocket, sid: str) -> None:
    if not await ws_admit(ws):
        return
    engine = engine_of(ws)
    try:
        views: AsyncIterator[ConversationView] = await engine.conversations(sid)
    except PanewatchError as exc:
        await ws.close(code=4404 if exc.status == 404 else 4422, reason=str(exc))
        return

    async def sender() -> None:
        async for view in views:
            await ws.send_json(view.model_dump(mode="json"))

    await run_until_closed(ws, sender(), sid=sid)
