"""Dashboard logins: the cookie carries a signed, expiring, revocable login id — never the API token.

Browsers send cookies for a host to every port of it, so a dev server an agent starts on
127.0.0.1 receives this cookie when the user opens it. With a login id instead of the token the
loss is bounded: it expires (``login_ttl_s``), ``POST /logout`` revokes it, and it is not the
token a CLI, a hook or ``/answer`` from a script could reuse for ever.

The id is ``nonce.expiry.mac`` with an HMAC keyed by the API token, so a restart with the same
token keeps the dashboard logged in, and a new token logs every browser out. Revocations are kept
in the state folder until they expire, so a revoked id stays dead across restarts.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path

COOKIE = "panewatch_login"
#: Revocations kept at most (each is dropped once its login has expired anyway).
MAX_REVOKED = 10_000


class Logins:
    """Issue, check and revoke login ids for one API token."""

    def __init__(
        self, token: str, ttl_s: float, *, revoked_file: Path | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        self._key = hashlib.sha256(b"panewatch-login\0" + token.encode()).digest()
        self.ttl_s = ttl_s
        self.clock = clock
        self.revoked_file = revoked_file
        self._revoked: dict[str, int] = self._load()

    def _mac(self, nonce: str, expiry: int) -> str:
        return hmac.new(self._key, f"{nonce}.{expiry}".encode(), hashlib.sha256).hexdigest()

    def issue(self) -> str:
        """A new login id, valid for ``ttl_s`` seconds."""
        nonce = secrets.token_urlsafe(16)
        expiry = int(self.clock() + self.ttl_s)
        return f"{nonce}.{expiry}.{self._mac(nonce, expiry)}"

    def _parse(self, login: str | None) -> tuple[str, int] | None:
        """(nonce, expiry) of a genuine, unexpired, unrevoked id."""
        if not login or len(login) > 200:
            return None
        parts = login.split(".")
        if len(parts) != 3 or not parts[1].isdigit():
            return None
        nonce, expiry = parts[0], int(parts[1])
        if not hmac.compare_digest(parts[2], self._mac(nonce, expiry)):
            return None
        if expiry <= self.clock() or nonce in self._revoked:
            return None
        return nonce, expiry

    def valid(self, login: str | None) -> bool:
        return self._parse(login) is not None

    def revoke(self, login: str | None) -> bool:
        """Revoke a live login id (here and after restarts); True if it was live."""
        parsed = self._parse(login)
        if parsed is None:
            return False
        now = self.clock()
        self._revoked = {n: e for n, e in self._revoked.items() if e > now}
        while len(self._revoked) >= MAX_REVOKED:
            del self._revoked[next(iter(self._revoked))]
        self._revoked[parsed[0]] = parsed[1]
        self._save()
        return True

    def _load(self) -> dict[str, int]:
        if self.revoked_file is None:
            return {}
        try:
            data = json.loads(self.revoked_file.read_text())
            now = self.clock()
            return {str(n): int(e) for n, e in data.items() if int(e) > now}
        except (OSError, ValueError, AttributeError):
            return {}

    def _save(self) -> None:
        if self.revoked_file is None:
            return
        tmp = self.revoked_file.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(self._revoked, f)
        os.replace(tmp, self.revoked_file)
