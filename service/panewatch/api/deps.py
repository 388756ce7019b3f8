"""What routes get from the app: the engine, the settings, and the token checks."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from typing import TypeVar

from fastapi import HTTPException, Request, WebSocket

from ..auth import origin_allowed, presented_token, token_matches
from ..config import Settings
from ..engine import Engine

T = TypeVar("T")


async def settle(value: T | Awaitable[T]) -> T:
    """A local engine answers at once; the cluster façade answers over the network."""
    if inspect.isawaitable(value):
        return await value
    return value


def engine_of(request: Request) -> Engine:
    engine: Engine = request.app.state.engine
    return engine


def settings_of(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def require_token(request: Request) -> None:
    """The API token, from ``Authorization: Bearer`` or the dashboard's cookie."""
    presented = presented_token(request)
    if presented is None:
        raise HTTPException(401, "missing token: send Authorization: Bearer <token>",
                            headers={"WWW-Authenticate": "Bearer"})
    if not token_matches(presented, settings_of(request).token or ""):
        raise HTTPException(403, "wrong token")


async def ws_admit(ws: WebSocket) -> bool:
    """Accept, then close at once with 4401/4403 if refused: a browser sees no reason for a
    rejected handshake, but it does see a close code, and the page needs it to stop retrying."""
    settings: Settings = ws.app.state.settings
    presented = presented_token(ws, allow_query=True)
    refusal = None
    if not origin_allowed(ws, settings.allowed_origins):
        refusal = (4403, "origin not allowed")
    elif presented is None:
        refusal = (4401, "missing token")
    elif not token_matches(presented, settings.token or ""):
        refusal = (4403, "wrong token")
    await ws.accept()
    if refusal:
        await ws.close(code=refusal[0], reason=refusal[1])
        return False
    return True
