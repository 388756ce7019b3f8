"""Who may talk to the service: one API token, dashboard logins, and the Origin check browsers need.

The token arrives as ``Authorization: Bearer`` (scripts, the CLI) or as ``?token=`` on a
WebSocket or on the login URL. A browser gets a login cookie instead (``login.py``): a random id
that expires and can be revoked, so the token itself never sits in a cookie jar. Cookies ride
along with requests from any page of the same site — every port of ``127.0.0.1`` is one site,
SameSite or not — so what a cookie may do also depends on where the request comes from
(:class:`Origins`): WebSockets check ``Origin``, and an unsafe method (POST, PUT, PATCH, DELETE)
authenticated by the cookie needs the service's own ``Origin`` or ``Sec-Fetch-Site: same-origin``.
A plain ``<form method=POST>`` on another port otherwise resumed sessions and logged the
dashboard out (issue 25). Bearer-token requests are never checked so: no page can set that header.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Iterable
from typing import Literal
from urllib.parse import urlsplit

from starlette.requests import HTTPConnection

from .devices import COOKIE as DEVICE_COOKIE
from .devices import TOKEN, Devices, Who
from .login import COOKIE, Logins
from .roles import Role
from .users import Users

__all__ = ["COOKIE", "DEVICE_COOKIE", "Gate", "Origins", "Who", "new_token", "presented_token", "token_matches"]

log = logging.getLogger("panewatch.api")

#: "revoked": a paired device's credential after its revocation (401, and the page says why).
Refusal = Literal["missing", "wrong", "revoked"]
#: Where a request's :class:`Who` is kept once the door let it in (routes read it back).
WHO_KEY = "panewatch.who"
#: Paths whose random id is the credential: a service worker's receipt must arrive even when
#: the device's cookie did not come along (a receipt only says "shown", it changes nothing).
CAPABILITY_PREFIXES = ("/api/push/receipts/",)
#: Writes that change nothing a ledger records (a page saying what it shows, every 2 s): not logged.
QUIET_WRITES = frozenset({"/api/push/seen"})
#: (status, reason, headers) for ``HttpGuard``.
HttpRefusal = tuple[int, str, dict[str, str]]
#: The one answer for a wrong report token and an unknown session (no oracle of which exist).
REPORT_REFUSED = "wrong report token for this session, or no such session"
#: Methods a cross-site page must not make with the login cookie (GET and HEAD change nothing).
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def new_token() -> str:
    return secrets.token_urlsafe(24)


def _bearer(value: str | None) -> str | None:
    if value and value[:7].lower() == "bearer ":
        return value[7:].strip()
    return None


def presented_token(conn: HTTPConnection, allow_query: bool = False) -> str | None:
    """The bearer token a request carries, if any (header first, then ``?token=`` if allowed)."""
    token = _bearer(conn.headers.get("authorization"))
    if token is None and allow_query:
        token = conn.query_params.get("token")
    return token


def token_matches(presented: str | None, expected: str) -> bool:
    return presented is not None and secrets.compare_digest(presented.encode(), expected.encode())


class Origins:
    """The service's own origins: the one it was reached on (``Origin`` naming the ``Host`` the
    request was sent to), ``public_url``'s (behind a proxy that rewrites Host), and
    ``allowed_origins`` (``*``: any)."""

    def __init__(self, allowed: Iterable[str] = (), public_url: str | None = None) -> None:
        names = {o.strip().rstrip("/").lower() for o in allowed if o.strip()}
        if public_url:
            parts = urlsplit(public_url)
            if parts.scheme and parts.netloc:
                names.add(f"{parts.scheme}://{parts.netloc}".lower())
        self.any = "*" in names
        self.names = frozenset(names - {"*"})

    def allows(self, origin: str, host: str | None) -> bool:
        """``origin`` is this service's own, or one allowed by name."""
        origin = origin.strip().lower()
        if self.any or origin in self.names:
            return True
        parts = urlsplit(origin)
        return bool(host) and parts.scheme in ("http", "https") and parts.netloc == (host or "").strip().lower()

    def websocket(self, conn: HTTPConnection) -> bool:
        """No ``Origin`` (a script, not a browser: browsers always send it on a WebSocket) or ours."""
        origin = conn.headers.get("origin")
        return origin is None or self.allows(origin, conn.headers.get("host"))

    def same_origin(self, conn: HTTPConnection) -> bool:
        """A request a page of this service made: the browser says so (``Sec-Fetch-Site``, which
        no page can set) or its ``Origin`` is ours. Neither (an old browser, a script with the
        cookie but no token): not shown to be ours, so refused."""
        if conn.headers.get("sec-fetch-site") == "same-origin":
            return True
        origin = conn.headers.get("origin")
        return origin is not None and self.allows(origin, conn.headers.get("host"))


def _cross_site(conn: HTTPConnection) -> str:
    origin = conn.headers.get("origin")
    where = f"Origin {origin[:200]!r}" if origin is not None else "no Origin header"
    return (
        f"cross-site request refused: a {conn.scope.get('method', '')} with the login cookie must come from "
        f"the dashboard's own page ({where}); scripts send Authorization: Bearer <token>"
    )


class Gate:
    """The one place that decides whether a request carries the API token or a live login, and
    whether a request the login cookie authenticates came from this service's own page."""

    def __init__(
        self,
        token: str,
        logins: Logins,
        origins: Origins | None = None,
        devices: Devices | None = None,
        users: Users | None = None,
    ) -> None:
        self.token = token
        self.logins = logins
        self.origins = origins or Origins()
        self.devices = devices
        #: whose each device is, with its role (None: no users, every device an owner as before)
        self.users = users

    def identify(self, conn: HTTPConnection, allow_query: bool = False) -> Who | Refusal:
        """Who the request is (the token, a login, a paired device), or why it is refused:
        "missing" (401) when nothing was presented, "revoked" (401) for a revoked device,
        "wrong" (403) otherwise. A bearer credential wins over cookies."""
        presented = presented_token(conn, allow_query)
        if presented is not None:
            if token_matches(presented, self.token):
                return TOKEN
            return self._device(presented) if self.devices and Devices.looks_like(presented) else "wrong"
        device = conn.cookies.get(DEVICE_COOKIE)
        if device is not None and self.devices is not None:
            found = self._device(device)
            if found != "wrong" or COOKIE not in conn.cookies:
                return found
        login = conn.cookies.get(COOKIE)
        if login is None:
            return "missing"
        return Who("login", "login-" + login[:8], "dashboard login") if self.logins.valid(login) else "wrong"

    def _device(self, credential: str) -> Who | Refusal:
        assert self.devices is not None
        found = self.devices.check(credential)
        if found is None:
            return "wrong"
        if found == "revoked":
            return "revoked"
        if self.users is None:
            return Who("device", found.id, found.name)
        user = self.users.user_of(found.id)
        if user is None:  # its user was removed (and the device revoked with it): the least role
            return Who("device", found.id, found.name, None, Role.viewer)
        return Who("device", found.id, found.name, user.name, user.role)

    def check(self, conn: HTTPConnection, allow_query: bool = False) -> Refusal | None:
        """None when let in; "missing" or "revoked" (401); "wrong" (403) otherwise."""
        who = self.identify(conn, allow_query)
        if isinstance(who, Who):
            conn.scope[WHO_KEY] = who
            return None
        return who

    def refusal(
        self, conn: HTTPConnection, *, metrics_public: bool, report_token_of: Callable[[str], str | None]
    ) -> HttpRefusal | None:
        """Who may reach a path, decided from the head alone, before any body byte is read
        (``HttpGuard``'s ``authorize``). ``report_token_of(sid)``: a session's report token, or None."""
        path = conn.url.path
        method = conn.scope.get("method")
        if (
            method in UNSAFE_METHODS
            and presented_token(conn) is None
            and (COOKIE in conn.cookies or DEVICE_COOKIE in conn.cookies)
            and not self.origins.same_origin(conn)
        ):  # before the cookie is even looked at: a forged request learns nothing and changes nothing
            return 403, _cross_site(conn), {}
        if path.startswith(CAPABILITY_PREFIXES):
            return None
        if path.startswith("/api/") or (path == "/metrics" and not metrics_public):
            why = self.check(conn)
            if why == "missing":
                return 401, "missing token: send Authorization: Bearer <token>", {"WWW-Authenticate": "Bearer"}
            if why == "revoked":
                return 401, "this device was revoked: pair it again", {"WWW-Authenticate": "Bearer"}
            if why == "wrong":
                return 403, "wrong token", {}
            if (
                method in UNSAFE_METHODS and path not in QUIET_WRITES
            ):  # every write says who made it (the ledger builds on this)
                who = conn.scope[WHO_KEY]
                log.info("%s %s by %s", method, path, who, extra={"actor": who.as_dict()})
        elif path == "/report":
            presented = presented_token(conn)
            if presented is None:
                return (
                    401,
                    "missing report token (Authorization: Bearer <report token>)",
                    {"WWW-Authenticate": "Bearer"},
                )
            sid = conn.query_params.get("session") or conn.headers.get("x-panewatch-session")
            expected = report_token_of(sid) if sid else None
            if expected is None or not token_matches(presented, expected):
                return 403, REPORT_REFUSED, {}
        return None
