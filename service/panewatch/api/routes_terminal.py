"""The dashboard's terminal channel: ``/ws/sessions/{sid}/term``.

One WebSocket per card carries a pane both ways, as an xterm.js widget needs it. The engine
keeps what the channel needs (each pane's output history, the repaint of its screen, the
held-keys rule: ``EngineAPI.terminal``); this route only carries it, as terminado's handler
does: it opens the session's ``TerminalChannel``, sends what ``messages`` yields (bytes as
binary frames, the rest as JSON text frames) and hands each JSON message from the page to
``input``, sending back the reply. Another node's pane is watched read-only.

Close codes: 4404 when there is no such session or it is deleted while watched; 4403 when it
is restricted to other users while watched (or a viewer types).
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, WebSocket

from ..access.roles import CLOSE_FORBIDDEN, KEYS
from ..engine import TerminalChannel
from ..errors import UnknownSession
from .deps import actor_of, engine_of, forbidden, ws_admit
from .routes_ws import run_first, until_hidden

#: Largest input message (a big paste: 256 KiB of keys, JSON-escaped).
TEXT_MAX = 2 * 256 * 1024

router = APIRouter()


@router.websocket("/ws/sessions/{sid}/term")
async def term(ws: WebSocket, sid: str) -> None:
    if not await ws_admit(ws):
        return
    try:
        channel = await engine_of(ws).terminal(sid, actor=actor_of(ws))
    except UnknownSession as exc:
        await ws.close(code=4404, reason=str(exc))
        return
    try:
        await run_first(
            ws, _sender(ws, channel), _receiver(ws, channel), until_hidden(ws, sid), what="terminal websocket"
        )
    finally:
        channel.close()


async def _send_json(ws: WebSocket, obj: dict[str, Any]) -> None:
    await ws.send_text(json.dumps(obj))


async def _sender(ws: WebSocket, channel: TerminalChannel) -> None:
    try:
        async for item in channel.messages():
            if isinstance(item, bytes):
                await ws.send_bytes(item)
            else:
                await _send_json(ws, item)
    except UnknownSession as exc:
        await ws.close(code=4404, reason=str(exc))


#: The page's messages that write to the pane (keys, held-back keys, a new size).
WRITES = frozenset({"input", "release", "resize"})


async def _receiver(ws: WebSocket, channel: TerminalChannel) -> None:
    """The page's JSON messages, each answered by the channel."""
    while True:
        message = await ws.receive()
        if message["type"] == "websocket.disconnect":
            return
        text = message.get("text")
        if text is None or len(text) > TEXT_MAX:
            await _send_json(ws, {"type": "error", "detail": "send JSON text messages (input up to 256 KiB)"})
            continue
        try:
            msg = json.loads(text)
        except ValueError:
            await _send_json(ws, {"type": "error", "detail": "not JSON"})
            continue
        if not isinstance(msg, dict):
            continue
        if msg.get("type") in WRITES and (why := forbidden(ws, KEYS)) is not None:
            await ws.close(code=CLOSE_FORBIDDEN, reason=why)  # a viewer watches, never types
            return
        try:
            reply = await channel.input(msg)
        except UnknownSession:
            return
        if reply is not None:
            await _send_json(ws, reply)
