"""Named users over the paired devices: one user, many devices, each user with a role.

Kept in the registry file beside the devices (format 6: ``users``, ``device_users``,
``session_users``); read once at start, then written through. A device belongs to exactly one
user; a device paired before users existed belongs to ``default``, an ``owner`` (what every
device could do then), made by the registry's migration. A session may be restricted to named
users: the others get 403 on it and do not see it listed; owners always see every session (they
can lift the restriction anyway, so hiding it from them would only pretend).
"""

from __future__ import annotations

import logging
import re
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..errors import InvalidRequest, PanewatchError
from .roles import Role

__all__ = ["DEFAULT_USER", "NAME_PATTERN", "LastUserOfSession", "UnknownUser", "User", "UserExists", "Users"]

log = logging.getLogger("panewatch.access.users")

#: Who a device paired without a user (or before users existed) belongs to: an owner.
DEFAULT_USER = "default"
#: A user's name: short, lower case, no spaces (it is typed in the CLI and shown in the ledger).
NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,31}$"
_NAME = re.compile(NAME_PATTERN)


class UnknownUser(PanewatchError, LookupError):
    """No user of that name."""

    status = 404


class UserExists(PanewatchError):
    """A user of that name exists already."""

    status = 409


class LastUserOfSession(PanewatchError):
    """Removing the user would leave a session restricted to it alone open to everyone."""

    status = 409


@dataclass
class User:
    name: str
    role: Role
    created: float


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise InvalidRequest(f"user name {name[:40]!r}: 1–32 of a-z 0-9 . _ -, starting with a letter or digit")
    return name


class Users:
    """The users, which device is whose, and which sessions are restricted to whom (``db``:
    the registry file; None: memory only)."""

    def __init__(self, db: sqlite3.Connection | None, *, wall: Callable[[], float] = time.time) -> None:
        self.db, self.wall = db, wall
        self._users: dict[str, User] = {}
        self._owner_of: dict[str, str] = {}  # device id -> user name
        self._sessions: dict[str, frozenset[str]] = {}  # session id -> its users
        self._watchers: list[Callable[[], None]] = []
        if db is not None:
            for name, role, created in db.execute("SELECT name, role, created FROM users"):
                self._users[name] = User(name, Role(role), created)
            self._owner_of = dict(db.execute("SELECT device, user FROM device_users").fetchall())
            grouped: dict[str, set[str]] = {}
            for session, user in db.execute("SELECT session, user FROM session_users"):
                grouped.setdefault(session, set()).add(user)
            self._sessions = {sid: frozenset(names) for sid, names in grouped.items()}

    def watch(self, fn: Callable[[], None]) -> Callable[[], None]:
        """Call ``fn`` whenever who may see which session changes (a restriction, a role, a user
        removed): a page's state stream sends a fresh snapshot. Returns the function that stops it."""
        self._watchers.append(fn)
        return lambda: self._watchers.remove(fn) if fn in self._watchers else None

    def _changed(self) -> None:
        for fn in list(self._watchers):
            fn()

    # -- users -----------------------------------------------------------------------------
    def get(self, name: str) -> User:
        found = self._users.get(name)
        if found is None:
            raise UnknownUser(f"no user {name[:40]!r}")
        return found

    def all(self) -> list[User]:
        return sorted(self._users.values(), key=lambda u: (u.created, u.name))

    def devices_of(self, name: str) -> list[str]:
        return [device for device, user in self._owner_of.items() if user == name]

    def add(self, name: str, role: Role) -> User:
        check_name(name)
        if name in self._users:
            raise UserExists(f"user {name!r} exists (change its role with PATCH /api/users/{name})")
        user = User(name, role, self.wall())
        self._users[name] = user
        self._write("INSERT INTO users (name, role, created) VALUES (?, ?, ?)", (name, str(role), user.created))
        log.info("added user %s (%s)", name, role)
        return user

    def ensure(self, name: str, role: Role | None) -> User:
        """The user, made with ``role`` when new (None: viewer; ``default`` an owner), given
        ``role`` when it exists and one is named."""
        if name not in self._users:
            return self.add(name, role or (Role.owner if name == DEFAULT_USER else Role.viewer))
        return self.set_role(name, role) if role is not None else self._users[name]

    def set_role(self, name: str, role: Role) -> User:
        user = self.get(name)
        user.role = role
        self._write("UPDATE users SET role = ? WHERE name = ?", (str(role), name))
        log.info("user %s is %s now", name, role)
        self._changed()
        return user

    def remove(self, name: str) -> list[str]:
        """Forget the user; the ids of its devices (the caller revokes them). Refused while a
        session is restricted to this user alone: without it that session would be open to all."""
        self.get(name)
        alone = sorted(sid for sid, names in self._sessions.items() if names == {name})
        if alone:
            listed = ", ".join(alone[:5]) + (f" and {len(alone) - 5} more" if len(alone) > 5 else "")
            raise LastUserOfSession(
                f"{name} is the only user session {listed} is restricted to: removing {name} would open it to "
                "everyone; restrict it to someone else or open it first"
            )
        devices = self.devices_of(name)
        del self._users[name]
        self._sessions = {sid: names - {name} for sid, names in self._sessions.items()}
        self._write("DELETE FROM users WHERE name = ?", (name,))
        self._write("DELETE FROM session_users WHERE user = ?", (name,))
        log.info("removed user %s (%d devices)", name, len(devices))
        self._changed()
        return devices

    # -- devices ---------------------------------------------------------------------------
    def assign(self, device: str, name: str) -> None:
        self.get(name)
        self._owner_of[device] = name
        self._write("INSERT OR REPLACE INTO device_users (device, user) VALUES (?, ?)", (device, name))

    def user_of(self, device: str) -> User | None:
        """The device's user; None for a device of a removed user (it is revoked with it)."""
        name = self._owner_of.get(device)
        return None if name is None else self._users.get(name)

    # -- sessions --------------------------------------------------------------------------
    def restrict(self, session: str, names: Iterable[str]) -> frozenset[str]:
        """Restrict ``session`` to these users (none: open to everyone again)."""
        wanted = frozenset(names)
        for name in wanted:
            self.get(name)
        self._write("DELETE FROM session_users WHERE session = ?", (session,))
        if wanted:
            self._sessions[session] = wanted
            for name in sorted(wanted):
                self._write("INSERT INTO session_users (session, user) VALUES (?, ?)", (session, name))
        else:
            self._sessions.pop(session, None)
        self._changed()
        return wanted

    def restrictions(self) -> dict[str, list[str]]:
        """Every restricted session and its users (sorted), for the owners' People view."""
        return {sid: sorted(names) for sid, names in sorted(self._sessions.items()) if names}

    def forget(self, session: str) -> None:
        """A deleted session's restriction goes with it."""
        if self._sessions.pop(session, None) is not None:
            self._write("DELETE FROM session_users WHERE session = ?", (session,))

    def restricted_to(self, session: str) -> frozenset[str]:
        """The users the session is restricted to (empty: everyone may see it)."""
        return self._sessions.get(session, frozenset())

    def device_may_see(self, device: str, session: str) -> bool:
        """Whether pushes about ``session`` may go to a subscription of ``device`` (a device id,
        or "token" / "login-…": owners, which see everything)."""
        if device not in self._owner_of:
            return True
        user = self.user_of(device)
        return user is not None and self.may_see(session, user.name, user.role)

    def may_see(self, session: str, user: str | None, role: Role) -> bool:
        names = self._sessions.get(session)
        return not names or role == Role.owner or (user is not None and user in names)

    def _write(self, sql: str, args: tuple[object, ...]) -> None:
        if self.db is not None:
            self.db.execute(sql, args)
