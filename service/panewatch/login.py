"""Dashboard logins: the cookie carries a random, expiring, revocable id — never the API token.

Browsers send cookies for a host to every port of it, so a dev server an agent starts on
127.0.0.1 receives this cookie when the user opens it. With a login id instead of the token the
loss is bounded: it expires (``login_ttl_s``), ``POST /logout`` revokes it, a restart forgets
every login, and it never becomes the token a CLI or a hook could reuse elsewhere.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable

COOKIE = "panewatch_login"
#: Live logins kept at most; the oldest goes first (a login loop cannot grow memory).
MAX_LOGINS = 1000


class Logins:
    """Login ids in memory, each with its expiry on a monotonic clock."""

    def __init__(self, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.clock = clock
        self._expires: dict[str, float] = {}

    def issue(self) -> str:
        """A new login id, valid for ``ttl_s`` seconds."""
        now = self.clock()
        self._expires = {k: t for k, t in self._expires.items() if t > now}
        while len(self._expires) >= MAX_LOGINS:
            del self._expires[next(iter(self._expires))]
        login = secrets.token_urlsafe(32)
        self._expires[login] = now + self.ttl_s
        return login

    def valid(self, login: str | None) -> bool:
        if not login:
            return False
        expires = self._expires.get(login)
        if expires is None:
            return False
        if expires <= self.clock():
            del self._expires[login]
            return False
        return True

    def revoke(self, login: str | None) -> bool:
        """Forget a login; True if it was live."""
        return self._expires.pop(login or "", None) is not None

    def __len__(self) -> int:
        return len(self._expires)
