"""What routes get from the app: the engine, the settings, who acts, and the credential checks.

Every check goes through the app's :class:`~panewatch.access.auth.Gate` (the API token or a live
dashboard login); ``refusal`` is the same rule the ``HttpGuard`` applies before any body byte.
"""

from __future__ import annotations

from fastapi import HTTPException, Request, WebSocket
from starlette.requests import HTTPConnection

from ..access.auth import WHO_KEY, Gate, HttpRefusal, Who
from ..config import Settings
from ..engine import Actor, ActorKind, EngineAPI
from ..errors import UnknownSession

#: How the door's kinds of caller (``auth.Who``) act on sessions: one to one.
ACTOR_KINDS = {"token": ActorKind.token, "login": ActorKind.user, "device": ActorKind.device}


def engine_of(request: HTTPConnection) -> EngineAPI:
    engine: EngineAPI = request.app.state.engine
    return engine


def actor_of(conn: HTTPConnection) -> Actor:
    """Who this request acts for, as the door identified it: the API token, a dashboard login,
    or a paired device (with its id and name)."""
    who = who_of(conn)
    return Actor(kind=ACTOR_KINDS[who.kind], id=who.id, name=who.name)


def settings_of(request: HTTPConnection) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def gate_of(request: HTTPConnection) -> Gate:
    gate: Gate = request.app.state.gate
    return gate


def secure_cookies(conn: HTTPConnection) -> bool:
    """Cookies are ``Secure`` when browsers reach the service over https (TLS of its own, or
    ``public_url`` behind a tunnel): a cookie then never travels in the clear."""
    settings = settings_of(conn)
    return (settings.public_url or "").startswith("https:") or settings.tls_cert is not None


def who_of(conn: HTTPConnection) -> Who:
    """Who made this request (the door identified it before routing)."""
    who = conn.scope.get(WHO_KEY)
    if not isinstance(who, Who):
        raise HTTPException(401, "missing token: send Authorization: Bearer <token>")
    return who


def refusal(conn: HTTPConnection) -> HttpRefusal | None:
    """Who may reach this path, from the request's head alone (``HttpGuard``'s ``authorize``)."""
    engine = engine_of(conn)

    def report_token_of(sid: str) -> str | None:
        try:
            return engine.reports.report_token(sid)
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
    if why == "revoked":
        raise HTTPException(401, "this device was revoked: pair it again", headers={"WWW-Authenticate": "Bearer"})
    if why == "wrong":
        raise HTTPException(403, "wrong token")


async def ws_admit(ws: WebSocket) -> bool:
    """Accept, then close at once with 4401/4403 if refused: a browser sees no reason for a
    rejected handshake, but it does see a close code, and the page needs it to stop retrying."""
    why = gate_of(ws).check(ws, allow_query=True)
    closing = None
    if not gate_of(ws).origins.websocket(ws):
        closing = (4403, "origin not allowed")
    elif why == "missing":
        closing = (4401, "missing token")
    elif why == "revoked":
        closing = (4401, "this device was revoked")
    elif why == "wrong":
        closing = (4403, "wrong token")
    await ws.accept()
    if closing:
        await ws.close(code=closing[0], reason=closing[1])
        return False
    who, devices = ws.scope.get(WHO_KEY), gate_of(ws).devices
    if isinstance(who, Who) and who.kind == "device" and devices is not None:
        devices.attach(who.id, ws)  # closed at once on revocation
    return True
