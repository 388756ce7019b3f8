"""What routes get from the app: the engine, the settings, who acts, and the credential checks.

Every check goes through the app's :class:`~panewatch.access.auth.Gate` (the API token or a live
dashboard login); ``refusal`` is the same rule the ``HttpGuard`` applies before any body byte.
Roles are enforced here only, by :func:`forbidden`: the route the router would pick, its
least role from ``access.roles``' one mapping, and a session restricted to named users — for
HTTP in ``refusal`` (before any body byte), for WebSockets in ``ws_admit`` (close 4403).
"""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException, Request, WebSocket
from starlette.requests import HTTPConnection
from starlette.routing import Match

from ..access import roles
from ..access.auth import WHO_KEY, Gate, HttpRefusal, Who
from ..access.users import UnknownUser, Users
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
    or a paired device (with its id and name, and its user)."""
    who = who_of(conn)
    return Actor(kind=ACTOR_KINDS[who.kind], id=who.id, name=who.name, user=who.user)


def users_of(conn: HTTPConnection) -> Users | None:
    users: Users | None = getattr(conn.app.state, "users", None)
    return users


def route_of(conn: HTTPConnection) -> tuple[str, dict[str, Any]] | None:
    """The path template of the route the router will pick for this request, and its parameters
    (the routers' own routes, as ``create_app`` listed them in ``app.state.routes``)."""
    for route in getattr(conn.app.state, "routes", ()):
        match, child = route.matches(conn.scope)
        if match == Match.FULL:
            return str(getattr(route, "path", "")), dict(child.get("path_params", {}))
    return None


def visible(conn: HTTPConnection, sid: str) -> bool:
    """This caller may see session ``sid`` (it is not restricted to other users). A device's
    role is its user's now, not when its socket opened: a role changed while it watches holds."""
    users, who = users_of(conn), who_of(conn)
    role = role_now(conn, who)
    return users is None or (role is not None and users.may_see(sid, who.user, role))


def role_now(conn: HTTPConnection, who: Who) -> roles.Role | None:
    """The caller's role now: a device's user's (None: that user was removed while a socket of it
    was open; its devices are revoked with it), else the credential's own."""
    users = users_of(conn)
    if users is None or who.user is None:
        return who.role
    try:
        return users.get(who.user).role
    except UnknownUser:
        return None


def forbidden(conn: HTTPConnection, method: str | None = None) -> str | None:
    """Why this caller may not use this route (its role, or a session restricted to others);
    None when it may. ``method``: the mapping's pseudo-method (``roles.KEYS``) for a socket's
    message; else the request's own (``roles.WEBSOCKET`` for a socket)."""
    who = conn.scope.get(WHO_KEY)
    found = route_of(conn)
    if not isinstance(who, Who) or found is None:  # not signed in (the door refused), or a 404
        return None
    template, params = found
    if method is None:
        method = roles.WEBSOCKET if conn.scope["type"] == "websocket" else str(conn.scope.get("method", "GET"))
    why = roles.refusal(roles.needed(method, template), role_now(conn, who) or roles.Role.viewer)
    if why is None and isinstance(sid := params.get("sid"), str) and not visible(conn, sid):
        why = f"session {sid[:40]} is restricted to named users, and {who.user or who.kind} is not one of them"
    return why


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

    found = gate_of(conn).refusal(
        conn, metrics_public=settings_of(conn).metrics_public, report_token_of=report_token_of
    )
    if found is None and (why := forbidden(conn)) is not None:
        return 403, why, {}
    return found


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
    elif (role_why := forbidden(ws)) is not None:
        closing = (roles.CLOSE_FORBIDDEN, role_why)
    await ws.accept()
    if closing:
        await ws.close(code=closing[0], reason=closing[1])
        return False
    who, devices = ws.scope.get(WHO_KEY), gate_of(ws).devices
    if isinstance(who, Who) and who.kind == "device" and devices is not None:
        devices.attach(who.id, ws)  # closed at once on revocation
    return True
