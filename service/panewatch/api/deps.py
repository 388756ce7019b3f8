"""What routes get from the app: the engine, the settings, and the credential checks.

Every check goes through the app's :class:`~panewatch.auth.Gate` (the API token or a live
dashboard login); ``refusal`` is the same rule the ``HttpGuard`` applies before any body byte.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from typing import TypeVar

from fastapi import HTTPException, Request, WebSocket
from starlette.requests import HTTPConnection

from ..auth import Gate, HttpRefusal, origin_allowed
from ..config import Settings
from ..engine import Engine
from ..errors import UnknownSession

T = TypeVar("T")


async def settle(value: T | Awaitable[T]) -> T:
    """A local engine answers at once; the cluster façade answers over the network."""
    if inspect.isawaitable(value):
        return await value
    return value


def engine_of(request: HTTPConnection) -> Engine:
    engine: Engine = request.app.state.engine
    return engine


def settings_of(request: HTTPConnection) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def gate_of(request: HTTPConnection) -> Gate:
    gate: Gate = request.app.state.gate
    return gate


def refusal(conn: HTTPConnection) -> HttpRefusal | None:
    """Who may reach this path, from the request's head alone (``HttpGuard``'s ``authorize``)."""
    engine = engine_of(conn)

    def report_token_of(sid: str) -> str | None:
        try:
            return engine.report_token(sid)
        except UnknownSession:  # never created, deleted, or another node's (its hooks report there)
            return None

    return gate_of(conn).refusal(conn, metrics_public=settings_of(conn).metrics_public, report_token_of=report_token_of)


def require_token(request: Request) -> None:
    """The API token, from ``Authorization: Bearer``, or the dashboard's login cookie."""
    why = gate_of(request).check(request)
    if why == "missing":
        raise HTTPException(
            401, "missing token: send Authorization: Bearer <token>", headers={"WWW-Authenticate": "Bearer"}
        )
    if why == "wrong":
        raise HTTPException(403, "wrong token")


async def ws_admit(ws: WebSocket) -> bool:
    """Accept, then close at once with 4401/4403 if refused: a browser sees no reason for a
    rejected handshake, but it does see a close code, and the page needs it to stop retrying."""
    why = gate_of(ws).check(ws, allow_query=True)
    closing = None
    if not origin_allowed(ws, settings_of(ws).allowed_origins):
        closing = (4403, "origin not allowed")
    elif why == "missing":
        closing = (4401, "missing token")
    elif why == "wrong":
        closing = (4403, "wrong token")
    await ws.accept()
    if closing:
        await ws.close(code=closing[0], reason=closing[1])
        return False
    return True
