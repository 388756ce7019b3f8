"""Who may talk to the service: one API token, dashboard logins, and the Origin check browsers need.

The token arrives as ``Authorization: Bearer`` (scripts, the CLI) or as ``?token=`` on a
WebSocket or on the login URL. A browser gets a login cookie instead (``login.py``): a random id
that expires and can be revoked, so the token itself never sits in a cookie jar. Cookies ride
along with requests from any page on localhost, so WebSockets also check ``Origin`` against the
service's own address and an explicit allow-list.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Literal
from urllib.parse import urlsplit

from starlette.requests import HTTPConnection

from .login import COOKIE, Logins

__all__ = ["COOKIE", "Gate", "new_token", "origin_allowed", "presented_token", "token_matches"]

Refusal = Literal["missing", "wrong"]
#: (status, reason, headers) for ``HttpGuard``.
HttpRefusal = tuple[int, str, dict[str, str]]
#: The one answer for a wrong report token and an unknown session (no oracle of which exist).
REPORT_REFUSED = "wrong report token for this session, or no such session"


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


class Gate:
    """The one place that decides whether a request carries the API token or a live login."""

    def __init__(self, token: str, logins: Logins) -> None:
        self.token = token
        self.logins = logins

    def check(self, conn: HTTPConnection, allow_query: bool = False) -> Refusal | None:
        """None when let in; "missing" (401) when nothing was presented; "wrong" (403) otherwise."""
        presented = presented_token(conn, allow_query)
        if presented is not None:
            return None if token_matches(presented, self.token) else "wrong"
        login = conn.cookies.get(COOKIE)
        if login is None:
            return "missing"
        return None if self.logins.valid(login) else "wrong"

    def refusal(
        self, conn: HTTPConnection, *, metrics_public: bool, report_token_of: Callable[[str], str | None]
    ) -> HttpRefusal | None:
        """Who may reach a path, decided from the head alone, before any body byte is read
        (``HttpGuard``'s ``authorize``). ``report_token_of(sid)``: a session's report token, or None."""
        path = conn.url.path
        if path.startswith("/api/") or (path == "/metrics" and not metrics_public):
            why = self.check(conn)
            if why == "missing":
                return 401, "missing token: send Authorization: Bearer <token>", {"WWW-Authenticate": "Bearer"}
            if why == "wrong":
                return 403, "wrong token", {}
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


def origin_allowed(conn: HTTPConnection, extra: list[str]) -> bool:
    """No Origin (a script, not a browser) or the service's own origin, or one allowed by name."""
    origin = conn.headers.get("origin")
    if origin is None:
        return True
    if origin in extra or "*" in extra:
        return True
    host = conn.headers.get("host")
    parts = urlsplit(origin)
    return bool(host) and parts.netloc == host and parts.scheme in ("http", "https")
