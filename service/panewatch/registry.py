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
import os
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

REGISTRY_FILE = "sessions.sqlite3"
#: Bumped when the tables change; a newer file is refused, never rewritten; an older one is
#: migrated in place (``_MIGRATIONS``). 2: ``launched`` and ``env``, what a resume starts again;
#: 3: the devices and push subscriptions tables (nothing in the sessions table changes); 4:
#: ``worktree``, the git worktree a session was started in; 5: the ledger (``ledger.py``) and its
#: chain's anchor; 6: users, which device is whose, and the sessions restricted to named users.
SCHEMA_VERSION = 6
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
    updated          REAL NOT NULL,
    launched         TEXT,            -- JSON list: the argv before hooks were added (NULL: before format 2)
    env              TEXT NOT NULL DEFAULT '{}',  -- JSON object: the session's own env, as the user gave it
    worktree         TEXT             -- JSON object: repo, branch, path, base (NULL: not in a worktree)
)
"""
#: The columns every Panewatch registry has had: a file with ``application_id`` 0 is ours (one
#: made before the id was set, or an empty one) only when its one table has them.
_OURS = frozenset({"id", "name", "command", "cwd", "created", "token_hash", "host_kind", "rows", "cols", "updated"})


#: Format 3: paired devices (only a hash of each credential) and their push subscriptions.
_DEVICE_TABLES = (
    """
CREATE TABLE IF NOT EXISTS devices (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    secret_hash TEXT NOT NULL,        -- sha256 of the device's credential
    created     REAL NOT NULL,        -- wall clock
    last_seen   REAL,
    revoked     REAL                  -- wall clock of the revocation; NULL while it may connect
)
""",
    """
CREATE TABLE IF NOT EXISTS push_subscriptions (
    id           TEXT PRIMARY KEY,
    device       TEXT NOT NULL,       -- a device id, "login-…" or "token": who subscribed
    name         TEXT NOT NULL,       -- the device's name as the user gave it
    endpoint     TEXT NOT NULL UNIQUE,
    p256dh       TEXT NOT NULL,
    auth         TEXT NOT NULL,
    created      REAL NOT NULL,
    last_sent    REAL,
    last_receipt REAL,
    unacked      INTEGER NOT NULL DEFAULT 0,  -- pushes since the last receipt
    sent         INTEGER NOT NULL DEFAULT 0,
    failed       INTEGER NOT NULL DEFAULT 0
)
""",
)
#: The ledger's rows by the user of their actor (``?actor=``/``?user=`` name people): an index
#: on the row's own JSON, so no column and no new format; made on every open as well (a file of
#: format 6 written before it gets it, an older Panewatch ignores it).
_LEDGER_USER_INDEX = "CREATE INDEX IF NOT EXISTS ledger_user ON ledger (json_extract(body, '$.actor.user'), seq)"
#: Format 4: the ledger of decisions, append-only and hash-chained (``ledger.py`` writes and
#: checks it), and the anchor: where the chain starts once old rows are pruned.
_LEDGER_TABLES = (
    """
CREATE TABLE IF NOT EXISTS ledger (
    seq     INTEGER PRIMARY KEY,      -- 1, 2, 3 …: a gap is a removed row
    at      REAL NOT NULL,            -- wall clock
    session TEXT NOT NULL,
    actor   TEXT NOT NULL,            -- the actor's id
    action  TEXT NOT NULL,
    body    TEXT NOT NULL,            -- the entry, canonical JSON: what is hashed
    prev    TEXT NOT NULL,            -- the previous row's hash (the anchor's for the first)
    hash    TEXT NOT NULL             -- sha256(prev + body)
)
""",
    "CREATE INDEX IF NOT EXISTS ledger_session ON ledger (session, seq)",
    "CREATE INDEX IF NOT EXISTS ledger_actor ON ledger (actor, seq)",
    _LEDGER_USER_INDEX,
    """
CREATE TABLE IF NOT EXISTS ledger_chain (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    first  INTEGER NOT NULL,          -- the first kept row's seq
    anchor TEXT NOT NULL,             -- its prev: the hash of the last pruned row
    last   INTEGER NOT NULL,          -- the newest row's seq (0: none yet)
    head   TEXT NOT NULL              -- its hash: a removed newest row shows too
)
""",
)
#: Format 6: named users over the devices (``access/users.py``); a device paired before users
#: existed belongs to ``default``, an owner: every device could do everything then.
_USER_TABLES = (
    """
CREATE TABLE IF NOT EXISTS users (
    name    TEXT PRIMARY KEY,
    role    TEXT NOT NULL,            -- viewer | operator | owner
    created REAL NOT NULL             -- wall clock
)
""",
    """
CREATE TABLE IF NOT EXISTS device_users (
    device TEXT PRIMARY KEY,          -- a devices.id
    user   TEXT NOT NULL              -- a users.name
)
""",
    """
CREATE TABLE IF NOT EXISTS session_users (
    session TEXT NOT NULL,            -- a session restricted to named users: one row per user
    user    TEXT NOT NULL,
    PRIMARY KEY (session, user)
)
""",
)
_ADOPT_DEVICES = (
    "INSERT INTO users (name, role, created) SELECT 'default', 'owner', "
    "(SELECT MIN(created) FROM devices) WHERE EXISTS (SELECT 1 FROM devices)",
    "INSERT INTO device_users (device, user) SELECT id, 'default' FROM devices",
)
#: What takes a registry of format N (the key) to N + 1, each in the transaction of the open.
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        "ALTER TABLE sessions ADD COLUMN launched TEXT",
        "ALTER TABLE sessions ADD COLUMN env TEXT NOT NULL DEFAULT '{}'",
    ),
    2: _DEVICE_TABLES,
    3: ("ALTER TABLE sessions ADD COLUMN worktree TEXT",),
    4: _LEDGER_TABLES,
    5: (*_USER_TABLES, *_ADOPT_DEVICES),
}


def _bring_up_to_date(conn: sqlite3.Connection, version: int) -> None:
    """Migrate a file of an older format step by step, or make a fresh one whole, in one transaction."""
    with conn:
        conn.execute("BEGIN IMMEDIATE")
        if version and conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'sessions'").fetchone():
            for step in range(version, SCHEMA_VERSION):
                for sql in _MIGRATIONS[step]:
                    conn.execute(sql)
        else:  # fresh, or of format 0 (never written one, or lost its version): made whole
            conn.execute(_SCHEMA)
            _add_missing_columns(conn)
            for table in (*_DEVICE_TABLES, *_LEDGER_TABLES, *_USER_TABLES):
                conn.execute(table)
        conn.execute(_LEDGER_USER_INDEX)
        conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")


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
    #: the argv before the hooks were added (a resume adds fresh ones); None: recorded before
    #: format 2, when it was not kept
    launched: list[str] | None = None
    #: the session's own environment, only what the user gave (never the server's)
    env: dict[str, str] = field(default_factory=dict)
    #: the git worktree it was started in (repo, branch, path, base), removed with the session
    worktree: dict[str, str] | None = None

    def row(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["command"] = json.dumps(self.command)
        out["launched"] = None if self.launched is None else json.dumps(self.launched)
        out["env"] = json.dumps(self.env)
        out["worktree"] = None if self.worktree is None else json.dumps(self.worktree)
        out["hooks"] = int(self.hooks)
        return out

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Record:
        data = {f.name: row[f.name] for f in fields(cls)}
        data["command"] = json.loads(row["command"])
        data["launched"] = None if row["launched"] is None else json.loads(row["launched"])
        data["env"] = json.loads(row["env"] or "{}")
        data["worktree"] = None if row["worktree"] is None else json.loads(row["worktree"])
        data["hooks"] = bool(row["hooks"])
        return cls(**data)


_COLUMNS = tuple(f.name for f in fields(Record))
_UPDATABLE = frozenset(_COLUMNS) - {"id", "created", "command", "launched", "env", "worktree"}


def _foreign(conn: sqlite3.Connection, app_id: int) -> str | None:
    """Why the open file is not a Panewatch registry (None: it is, or it is empty). Read only:
    a file that is not ours is refused before anything is written to it."""
    if app_id == APPLICATION_ID:
        return None
    if app_id != 0:
        return f"application id {app_id:#x}"
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    tables = [t for t in tables if not t.startswith("sqlite_")]
    if not tables:
        return None
    if tables == ["sessions"]:
        columns = {r[1] for r in conn.execute("PRAGMA table_info(sessions)")}
        if columns >= _OURS:
            return None
    return f"its tables: {', '.join(sorted(tables))[:120]}"


def _add_missing_columns(conn: sqlite3.Connection) -> None:
    """A table of format 0 (no ``user_version``) with the columns later formats added."""
    have = {r[1] for r in conn.execute("PRAGMA table_info(sessions)")}
    for sql in (sql for step in sorted(_MIGRATIONS) for sql in _MIGRATIONS[step] if " ADD COLUMN " in sql):
        column = sql.split("ADD COLUMN ", 1)[1].split()[0]
        if column not in have:
            conn.execute(sql)


class Registry:
    """The open registry file. Every write is its own small transaction (WAL, no fsync wait)."""

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path = path
        self._conn = conn

    @classmethod
    def open(cls, path: Path | str) -> Registry:
        """Open or create; a damaged, foreign or newer file raises ``RegistryError`` (one line)."""
        path = Path(path)
        try:
            # made 0600 before SQLite opens it: its -wal and -shm files take the same mode, and in
            # a state folder others may enter (agent_users) no file of it is ever readable by them
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise RegistryError(
                f"cannot open the session registry {path}: {reason}; check the state "
                "folder's permissions or use another --state-dir"
            ) from None
        try:
            conn.row_factory = sqlite3.Row
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            why = _foreign(conn, app_id)
            if why is not None:
                raise RegistryError(
                    f"{path} is not a Panewatch session registry ({why}); move it aside or use another --state-dir"
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
            _bring_up_to_date(conn, version)
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

    @property
    def db(self) -> sqlite3.Connection:
        """The open file, for the stores that keep their tables in it (``devices``, ``push``):
        one file, one schema version, one place that migrates it."""
        return self._conn

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
