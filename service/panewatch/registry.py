"""The session registry: every session a server started, kept in the state folder across restarts.

A restarted server reads it to adopt the panes that are still alive (tmux host) and to show the
others as ``lost`` with the reason, instead of forgetting them. stdlib ``sqlite3``: nothing to
install, atomic updates, and a file a user can inspect with the ``sqlite3`` tool.

Only a hash of each session's report token is stored: the token itself lives in the agent's
environment, and the hash is enough to check the agent's hook reports after a restart.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

REGISTRY_FILE = "sessions.sqlite3"
#: Bumped when the table changes incompatibly; a newer file is refused, never rewritten.
SCHEMA_VERSION = 1
#: ``PRAGMA application_id``: tells a Panewatch registry from any other SQLite file ("PWch").
APPLICATION_ID = 0x50576368

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id               TEXT PRIMARY KEY,
    name             TEXT NOT NULL,
    agent            TEXT,
    command          TEXT NOT NULL,   -- JSON list: the argv as launched
    cwd              TEXT NOT NULL,
    created          REAL NOT NULL,   -- wall clock
    token_hash       TEXT NOT NULL,   -- sha256 of the report token
    host_kind        TEXT NOT NULL,   -- "tmux" | "pty" | ...
    host_ref         TEXT,            -- the host's address of the pane (tmux: %12)
    agent_session_id TEXT,            -- the agent's own conversation id, from its hooks
    state            TEXT,
    since            REAL,            -- wall clock of the last state change
    why              TEXT,
    exit_code        INTEGER,
    rows             INTEGER NOT NULL,
    cols             INTEGER NOT NULL,
    hooks            INTEGER NOT NULL DEFAULT 1,
    last_screen      TEXT,            -- JSON list of the visible lines at the last state change
    updated          REAL NOT NULL
)
"""


class RegistryError(Exception):
    """The registry file cannot be used; the message names the file and what to do, in one line."""


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_matches(token: str, token_hash: str) -> bool:
    """Constant-time check of a presented report token against the stored hash."""
    return hmac.compare_digest(hash_token(token), token_hash)


@dataclass
class Record:
    """One session as the registry keeps it."""

    id: str
    name: str
    command: list[str]
    cwd: str
    token_hash: str
    host_kind: str
    rows: int
    cols: int
    agent: str | None = None
    created: float = field(default_factory=time.time)
    host_ref: str | None = None
    agent_session_id: str | None = None
    state: str | None = None
    since: float | None = None
    why: str | None = None
    exit_code: int | None = None
    hooks: bool = True
    last_screen: str | None = None  # JSON list of lines: what a lost session still shows

    def row(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["command"] = json.dumps(self.command)
        out["hooks"] = int(self.hooks)
        return out

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Record:
        data = {f.name: row[f.name] for f in fields(cls)}
        data["command"] = json.loads(row["command"])
        data["hooks"] = bool(row["hooks"])
        return cls(**data)


_COLUMNS = tuple(f.name for f in fields(Record))
_UPDATABLE = frozenset(_COLUMNS) - {"id", "created", "command"}


class Registry:
    """The open registry file. Every write is its own small transaction (WAL, no fsync wait)."""

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path = path
        self._conn = conn

    @classmethod
    def open(cls, path: Path | str) -> Registry:
        """Open or create; a damaged, foreign or newer file raises ``RegistryError`` (one line)."""
        path = Path(path)
        fresh = not path.exists()
        try:
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise RegistryError(
                f"cannot open the session registry {path}: {exc}; check the state "
                "folder's permissions or use another --state-dir"
            ) from None
        try:
            conn.row_factory = sqlite3.Row
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if not fresh and app_id not in (0, APPLICATION_ID):
                raise RegistryError(
                    f"{path} is not a Panewatch session registry (application id {app_id:#x}); "
                    "move it aside or use another --state-dir"
                )
            if version > SCHEMA_VERSION:
                raise RegistryError(
                    f"the session registry {path} was written by a newer Panewatch (format {version}, this "
                    f"one reads {SCHEMA_VERSION}); upgrade Panewatch, or use another --state-dir"
                )
            check = conn.execute("PRAGMA quick_check").fetchone()[0]
            if check != "ok":
                raise sqlite3.DatabaseError(check)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=2000")
            conn.execute(_SCHEMA)
            conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except RegistryError:
            conn.close()
            raise
        except sqlite3.Error as exc:
            conn.close()
            raise RegistryError(
                f"the session registry {path} is damaged ({exc}); move it aside (mv {path} {path}.bad) to "
                "start with an empty one: agents still running in tmux keep running but are not adopted"
            ) from None
        try:
            path.chmod(0o600)
        except OSError:
            pass
        return cls(path, conn)

    @classmethod
    def in_state_dir(cls, state_dir: Path | str) -> Registry:
        return cls.open(Path(state_dir) / REGISTRY_FILE)

    def close(self) -> None:
        self._conn.close()

    # -- reading -------------------------------------------------------------------------
    def all(self) -> list[Record]:
        """Every session, oldest first (the order the dashboard showed them in)."""
        return list(self._iter("SELECT * FROM sessions ORDER BY created, id"))

    def get(self, sid: str) -> Record | None:
        return next(self._iter("SELECT * FROM sessions WHERE id = ?", sid), None)

    def _iter(self, sql: str, *args: Any) -> Iterator[Record]:
        for row in self._conn.execute(sql, args):
            yield Record.from_row(row)

    # -- writing -------------------------------------------------------------------------
    def add(self, record: Record) -> None:
        row = record.row()
        row["updated"] = time.time()
        names = ", ".join(row)
        marks = ", ".join(f":{k}" for k in row)
        self._conn.execute(f"INSERT OR REPLACE INTO sessions ({names}) VALUES ({marks})", row)

    def update(self, sid: str, **values: Any) -> None:
        """Change some fields of one session (unknown names are a programming error)."""
        bad = set(values) - _UPDATABLE
        if bad:
            raise ValueError(f"not updatable: {', '.join(sorted(bad))}")
        if "hooks" in values:
            values["hooks"] = int(values["hooks"])
        values["updated"] = time.time()
        sets = ", ".join(f"{k} = :{k}" for k in values)
        self._conn.execute(f"UPDATE sessions SET {sets} WHERE id = :id", {**values, "id": sid})

    def update_many(self, rows: list[tuple[str, dict[str, Any]]]) -> None:
        """Several sessions' ``update`` in one transaction (one write to the file, not one each)."""
        with self._conn:
            self._conn.execute("BEGIN")
            for sid, values in rows:
                self.update(sid, **values)

    def set_state(
        self, sid: str, state: str, since: float, why: str | None = None, exit_code: int | None = None
    ) -> None:
        self.update(sid, state=state, since=since, why=why, exit_code=exit_code)

    def set_agent_session(self, sid: str, agent_session_id: str) -> None:
        """The agent's own conversation id (Claude Code's ``session_id``), for ``--resume``."""
        self.update(sid, agent_session_id=agent_session_id)

    def save_screens(self, screens: list[tuple[str, str]]) -> None:
        """Many sessions' last screens (JSON lists of lines) in one transaction."""
        now = time.time()
        with self._conn:
            self._conn.execute("BEGIN")
            self._conn.executemany(
                "UPDATE sessions SET last_screen = ?, updated = ? WHERE id = ?",
                [(screen, now, sid) for sid, screen in screens],
            )

    def remove(self, sid: str) -> None:
        self._conn.execute("DELETE FROM sessions WHERE id = ?", (sid,))
