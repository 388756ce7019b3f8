"""Paired devices: a credential of its own per phone or browser, instead of the shared API token.

Why: the token is one secret for everything (scripts, the CLI, the first login); a phone that
is lost or sold must be cut off without changing it, and a write must say *which* device made
it. ``panewatch pair`` (or the page's button) asks the server for a one-time code, valid for
``CODE_TTL_S`` (5 minutes) and shown with its QR; the phone that opens it names itself and gets
its credential: an HttpOnly cookie (the page) or a bearer token (a script). Only a hash of each
credential is kept (in the registry file, 0600 in the state folder). Revoking a device refuses
its credential at once (401), closes its WebSockets and drops its push subscriptions.

The acting party of a request is a :class:`Who` — the API token, a dashboard login, or a
device with its id and name — which the engine's actor type (token / device / user / policy /
node) maps onto one to one.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
import sqlite3
import time
import weakref
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, Literal

from starlette.websockets import WebSocket, WebSocketState

from .roles import Role

log = logging.getLogger("panewatch.access.devices")

#: The device cookie (the login cookie is ``login.COOKIE``).
COOKIE = "panewatch_device"
#: How long a pairing code stays good, and how many wrong codes void every open one.
CODE_TTL_S = 300.0
MAX_FAILED_CODES = 10
#: A device cookie's life: the most browsers keep one (Chromium caps it at 400 days).
COOKIE_MAX_AGE_S = 400 * 24 * 3600
#: Letters that cannot be misread for one another (no 0/O, 1/I/L): 32 symbols, 5 bits each.
CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8
#: ``last_seen`` is written to the file at most this often per device (it is kept in memory).
SEEN_WRITE_S = 60.0
#: WebSocket close code for a revoked device (the page stops retrying on 44xx).
CLOSE_REVOKED = 4401


@dataclass(frozen=True)
class Who:
    """Who acts on a request: ``kind`` "token" (the API token: scripts, the CLI), "login" (a
    dashboard login from the token URL; ``id`` names that browser's login) or "device" (of
    ``user``, whose ``role`` it has; the token and its logins are owners)."""

    kind: Literal["token", "login", "device"]
    id: str
    name: str
    user: str | None = None
    role: Role = Role.owner

    def as_dict(self) -> dict[str, str | None]:
        return {"kind": self.kind, "id": self.id, "name": self.name, "user": self.user, "role": str(self.role)}

    def __str__(self) -> str:
        if self.kind != "device":
            return self.kind
        return f"device {self.id} ({self.name}) of {self.user}" if self.user else f"device {self.id} ({self.name})"


TOKEN = Who("token", "token", "API token")


@dataclass
class Device:
    id: str
    name: str
    secret_hash: str
    created: float
    last_seen: float | None = None
    revoked: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "created": self.created,
            "last_seen": self.last_seen,
            "revoked": self.revoked,
        }


class PairingRefused(Exception):
    """A pairing code that is unknown, used, or expired (the message says which, without
    telling a guesser whether a code of that shape is open)."""


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def normalise_code(code: str) -> str:
    """``abcd-efgh`` and ``ABCDEFGH`` are the same code (people type what the phone shows)."""
    return "".join(ch for ch in code.upper() if ch in CODE_ALPHABET)


def shown_code(code: str) -> str:
    return f"{code[:4]}-{code[4:]}"


class Devices:
    """The paired devices (kept in ``db``, the registry file; None: memory only) and the open
    pairing codes (memory only: a restart voids them, which is the safe side)."""

    def __init__(self, db: sqlite3.Connection | None, *, wall: Callable[[], float] = time.time) -> None:
        self.db, self.wall = db, wall
        self._codes: dict[str, float] = {}  # code -> expiry (wall clock)
        self._code_users: dict[str, str] = {}  # code -> the user its device will belong to
        self._failed = 0
        self._devices: dict[str, Device] = {}
        self._written_seen: dict[str, float] = {}
        #: each device's open WebSockets, closed when it is revoked (weak: a closed one just goes)
        self._sockets: dict[str, weakref.WeakSet[WebSocket]] = {}
        #: called with a device id when it is revoked (the push store drops its subscriptions)
        self.on_revoke: list[Callable[[str], None]] = []
        if db is not None:
            for row in db.execute("SELECT id, name, secret_hash, created, last_seen, revoked FROM devices"):
                self._devices[row[0]] = Device(*row)

    # -- pairing ---------------------------------------------------------------------------
    def new_code(self, user: str | None = None) -> tuple[str, float]:
        """A one-time code (for a device of ``user``) and when it expires (wall clock)."""
        now = self.wall()
        self._codes = {c: e for c, e in self._codes.items() if e > now}
        self._code_users = {c: u for c, u in self._code_users.items() if c in self._codes}
        code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
        self._codes[code] = now + CODE_TTL_S
        if user is not None:
            self._code_users[code] = user
        return code, now + CODE_TTL_S

    def user_of_code(self, code: str) -> str | None:
        """The user an open code pairs for (None: no user named)."""
        return self._code_users.get(normalise_code(code))

    def pair(self, code: str, name: str) -> tuple[Device, str]:
        """Use ``code`` once: a new device named ``name`` and its credential (shown only now)."""
        now = self.wall()
        wanted = normalise_code(code)
        self._code_users.pop(wanted, None)
        expiry = self._codes.pop(wanted, None)
        if expiry is None or expiry <= now:
            self._failed += expiry is None
            if self._failed >= MAX_FAILED_CODES:  # someone is guessing: void every open code
                log.warning("%d wrong pairing codes: every open code is void now", self._failed)
                self._codes.clear()
                self._failed = 0
            raise PairingRefused("this pairing code expired" if expiry is not None else "unknown or used pairing code")
        device_id = secrets.token_hex(4)
        while device_id in self._devices:
            device_id = secrets.token_hex(4)
        secret = secrets.token_urlsafe(32)
        device = Device(device_id, name, _hash(secret), now, now)
        self._devices[device_id] = device
        if self.db is not None:
            self.db.execute(
                "INSERT INTO devices (id, name, secret_hash, created, last_seen) VALUES (?, ?, ?, ?, ?)",
                (device.id, device.name, device.secret_hash, device.created, device.last_seen),
            )
        log.info("paired device %s (%s)", device.id, device.name)
        return device, f"{device_id}.{secret}"

    # -- credentials -----------------------------------------------------------------------
    def check(self, credential: str | None) -> Device | Literal["revoked"] | None:
        """The live device whose credential this is; "revoked" for a revoked one (401, so the
        page says so), None for anything else."""
        if not credential or len(credential) > 200 or "." not in credential:
            return None
        device_id, secret = credential.split(".", 1)
        device = self._devices.get(device_id)
        if device is None or not hmac.compare_digest(_hash(secret), device.secret_hash):
            return None
        if device.revoked is not None:
            return "revoked"
        self._seen(device)
        return device

    @staticmethod
    def looks_like(credential: str) -> bool:
        """A device credential (``id.secret``), not the API token (which has no dot)."""
        head = credential.split(".", 1)[0]
        return "." in credential and len(head) == 8 and all(c in "0123456789abcdef" for c in head)

    def _seen(self, device: Device) -> None:
        now = self.wall()
        device.last_seen = now
        if self.db is not None and now - self._written_seen.get(device.id, 0.0) >= SEEN_WRITE_S:
            self._written_seen[device.id] = now
            self.db.execute("UPDATE devices SET last_seen = ? WHERE id = ?", (now, device.id))

    def get(self, device_id: str) -> Device | None:
        return self._devices.get(device_id)

    def listing(self) -> list[dict[str, Any]]:
        """Every device (revoked ones too, marked), oldest first, with its open sockets."""
        out = []
        for device in sorted(self._devices.values(), key=lambda d: d.created):
            out.append({**device.as_dict(), "sockets": len(self._sockets.get(device.id, ()))})
        return out

    # -- revocation ------------------------------------------------------------------------
    def attach(self, device_id: str, ws: WebSocket) -> None:
        """Remember an open WebSocket of the device, to close it when the device is revoked."""
        self._sockets.setdefault(device_id, weakref.WeakSet()).add(ws)

    async def revoke(self, device_id: str) -> bool:
        """Refuse the device's credential from now on, drop its push subscriptions, close its
        WebSockets (code 4401); False when there is no such live device."""
        device = self._devices.get(device_id)
        if device is None or device.revoked is not None:
            return False
        device.revoked = self.wall()
        if self.db is not None:
            self.db.execute("UPDATE devices SET revoked = ? WHERE id = ?", (device.revoked, device_id))
        for callback in self.on_revoke:
            try:
                callback(device_id)
            except Exception:
                log.exception("revocation callback failed")
        sockets = list(self._sockets.pop(device_id, ()))
        await asyncio.gather(*(_close(ws) for ws in sockets))
        log.info("revoked device %s (%s); closed %d sockets", device.id, device.name, len(sockets))
        return True


async def _close(ws: WebSocket) -> None:
    if ws.client_state == WebSocketState.CONNECTED:
        with suppress(Exception):
            await ws.close(code=CLOSE_REVOKED, reason="this device was revoked")
