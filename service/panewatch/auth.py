"""Who may talk to the service: one API token, and the Origin check browsers need.

The token arrives as ``Authorization: Bearer``, or as a cookie set when the page is opened
with ``?token=`` (browsers cannot put headers on a WebSocket). Cookies ride along with
requests from any page on localhost, so WebSockets also check ``Origin`` against the
service's own address and an explicit allow-list.
"""

from __future__ import annotations

import secrets
from urllib.parse import urlsplit

from starlette.requests import HTTPConnection

COOKIE = "panewatch_token"


def new_token() -> str:
    return secrets.token_urlsafe(24)


def _bearer(value: str | None) -> str | None:
    if value and value[:7].lower() == "bearer ":
        return value[7:].strip()
    return None


def presented_token(conn: HTTPConnection, allow_query: bool = False) -> str | None:
    """The token a request carries, if any (header first, then cookie, then ``?token=``)."""
    token = _bearer(conn.headers.get("authorization")) or conn.cookies.get(COOKIE)
    if token is None and allow_query:
        token = conn.query_params.get("token")
    return token


def token_matches(presented: str | None, expected: str) -> bool:
    return presented is not None and secrets.compare_digest(presented.encode(), expected.encode())


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
