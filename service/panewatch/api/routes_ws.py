"""WebSockets: every state event (``/ws/state``) and one session's screen frames.

Senders never hold up the hosts: the engine's streams skip or resynchronise a slow client
instead of queueing for it, so a stuck browser costs nothing but its own frames.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Coroutine
from contextlib import suppress
from typing import Any

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from starlette.websockets import WebSocketState

from ..access.roles import CLOSE_FORBIDDEN
from ..engine import ScreenFrame
from ..errors import UnknownSession
from .deps import engine_of, users_of, visible, ws_admit

log = logging.getLogger("panewatch.api")

router = APIRouter()


@router.websocket("/ws/state")
async def ws_state(ws: WebSocket) -> None:
    if not await ws_admit(ws):
        return
    stream = await engine_of(ws).events()
    users = users_of(ws)
    # who may see what changed (a session restricted or opened, a role): a fresh snapshot says it
    unwatch = users.watch(stream.resync) if users is not None else None

    async def sender() -> None:
        async for event in stream:
            shown = event.as_dict()
            if isinstance(sid := _session_of(shown), str) and not visible(ws, sid):
                continue  # restricted to other users: not even its existence
            if shown["type"] == "snapshot":
                shown["sessions"] = [s for s in shown["sessions"] if visible(ws, s["id"])]
            await ws.send_json(shown)

    try:
        await run_until_closed(ws, sender())
    finally:
        stream.close()
        if unwatch is not None:
            unwatch()


@router.websocket("/ws/sessions/{sid}/screen")
async def ws_screen(ws: WebSocket, sid: str) -> None:
    if not await ws_admit(ws):
        return
    interval = ws.app.state.settings.screen_interval_ms / 1000
    try:
        frames: AsyncIterator[ScreenFrame] = await engine_of(ws).screens(
            sid, interval=interval, styles=ws.query_params.get("styles") in ("1", "true")
        )
    except UnknownSession as exc:
        await ws.close(code=4404, reason=str(exc))
        return

    async def sender() -> None:
        async for frame in frames:
            await ws.send_json(frame.model_dump(mode="json"))

    await run_until_closed(ws, sender(), sid=sid)


def _session_of(event: dict[str, Any]) -> object:
    """The session id an event is about (``session`` is an id, or a whole record with one)."""
    found = event.get("session")
    return found.get("id") if isinstance(found, dict) else found


async def run_until_closed(ws: WebSocket, sender: Coroutine[Any, Any, None], *, sid: str | None = None) -> None:
    """Run ``sender`` until the client goes away (reading is how a close is noticed), or, for
    one session's socket (``sid``), until that session is restricted to other users."""

    async def receiver() -> None:
        while True:
            message = await ws.receive()
            if message["type"] == "websocket.disconnect":
                return

    await run_first(ws, sender, receiver(), *([until_hidden(ws, sid)] if sid is not None else []))


async def until_hidden(ws: WebSocket, sid: str) -> None:
    """Return once this caller may no longer see session ``sid`` (restricted to other users
    while it watched), the socket closed with 4403 and the reason; never, on a server without
    users."""
    changed = asyncio.Event()
    users = users_of(ws)
    unwatch = users.watch(changed.set) if users is not None else None
    try:
        while True:
            await changed.wait()
            changed.clear()
            if not visible(ws, sid):
                why = f"session {sid[:40]} is restricted to named users now, and you are not one of them"
                await ws.close(code=CLOSE_FORBIDDEN, reason=why)
                return
    finally:
        if unwatch is not None:
            unwatch()


async def run_first(ws: WebSocket, *coros: Coroutine[Any, Any, None], what: str = "websocket") -> None:
    """Run a socket's coroutines until the first one ends, cancel the rest, close the socket."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        for task in pending:
            with suppress(asyncio.CancelledError, Exception):
                await task
        for task in done:
            exc = task.exception()
            if exc and not isinstance(exc, (WebSocketDisconnect, RuntimeError, ConnectionError)):
                log.warning("%s ended with %r", what, exc)
    finally:
        if ws.client_state == WebSocketState.CONNECTED:
            with suppress(Exception):
                await ws.close()
