"""The ledger: one row for every decision that touched a pane, kept in the registry's file.

A sink of the engine's events like the keeper and the notifier: answers (and whether they
took), keys typed into a blocked pane, guarded sends, resumes, creates, deletes, every refused
write with its reason, and the approval policy's decisions, each with its actor and what the
actor was shown (the request, the screen, bounded). Which event makes which row is one table
(``_ROWS``); a new kind of decision is one entry there.

Append-only and hash-chained: each row's hash is sha256 over the previous row's hash and the
row's canonical JSON, so an edited, removed or reordered row shows (``verify``, which
``panewatch ledger verify`` runs off-line on a read-only open). Pruning old rows keeps the chain
checkable: the hash before the first kept row is stored as the anchor.

Writes are one small transaction each on the registry's connection (WAL, as the registry's):
a committed row survives a killed server. The ledger never takes the engine down: a failed
write is logged, not raised.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..engine import Actor, ActorKind
from ..engine.events import Acted, Action, Created, Deleted, Event
from ..engine.models import RequestView

__all__ = [
    "Broken",
    "Ledger",
    "LedgerEntry",
    "LedgerPage",
    "LedgerQuery",
    "export_lines",
    "open_read_only",
    "read_after",
    "verify",
]

log = logging.getLogger("panewatch.sinks.ledger")

#: The hash the first row of a fresh ledger follows.
GENESIS = "0" * 64
#: How often old rows are pruned when ``ledger_days`` is set (seconds between prunes).
PRUNE_EVERY_S = 3600.0
#: The most rows one page (or one read of an export) carries.
PAGE_MAX = 500


class LedgerEntry(BaseModel):
    """One decision, as ``GET /api/ledger`` and the export show it."""

    model_config = ConfigDict(extra="forbid")

    seq: int = Field(description="its place in the chain: 1, 2, 3 …")
    at: float = Field(description="wall clock, seconds")
    session: str
    agent: str | None
    actor: Actor
    action: str = Field(description="answer, keys, send, resume, create, delete, cancel or policy")
    request: RequestView | None = Field(None, description="what the blocked pane asked, as the actor was shown it")
    option: int | str | None = None
    keys: str | None = None
    took: bool | None = Field(None, description="an answer verified to have taken (None: not a checked write)")
    refused: str | None = Field(None, description="the write was refused, and why: nothing was written")
    state: str | None = Field(None, description="the pane's state as read right before the write")
    screen: list[str] = Field(default_factory=list, description="the screen as the actor saw it (last lines)")
    detail: str = ""
    rule: str | None = Field(None, description="a policy decision: the rule that matched (None: no rule)")
    reason: str | None = Field(None, description="a policy decision: the rule's reason")


class LedgerPage(BaseModel):
    """A page of entries, oldest first; ``next`` is the ``before`` that reads the page before it."""

    entries: list[LedgerEntry]
    next: int | None = Field(description="pass as before= for the older page; null: this is the oldest")


@dataclass(frozen=True)
class LedgerQuery:
    """The filters of a page: exact session; ``actor``: the actor's id or its user's name (a
    person, or one device); ``user``: the user's name only; not before ``since``, seq below
    ``before``."""

    session: str | None = None
    actor: str | None = None
    since: float | None = None
    before: int | None = None
    limit: int = 100
    user: str | None = None


@dataclass(frozen=True)
class Broken:
    """Where the chain breaks first: the row's seq and what is wrong with it."""

    seq: int
    why: str

    def __str__(self) -> str:
        return f"row {self.seq}: {self.why}"


# --- events → rows -------------------------------------------------------------------------------

_Row = dict[str, Any]


def _actor(actor: Actor | None) -> dict[str, Any]:
    return (actor or Actor(kind=ActorKind.node, id="unknown", name="another node")).model_dump(mode="json")


def _acted(event: Acted) -> _Row | None:
    if event.action == Action.resize:
        return None  # not a decision
    if event.action == Action.keys and event.refused is None and event.state != "blocked":
        return None  # typing into a pane that asks nothing: its burst is logged, not a decision
    return {
        "session": event.session,
        "agent": event.agent,
        "actor": _actor(event.actor),
        "action": str(event.action),
        "request": None if event.request is None else event.request.model_dump(mode="json"),
        "option": event.option,
        "keys": event.keys,
        "took": False if event.refused is not None else event.took,
        "refused": event.refused,
        "state": None if event.state is None else str(event.state),
        "screen": list(event.screen),
        "detail": event.detail,
    }


def _created(event: Created) -> _Row | None:
    if event.restored or event.actor is None:
        return None  # brought back at start, or another node's: nobody decided it here
    info = event.session
    return {
        "session": info.id,
        "agent": info.agent,
        "actor": _actor(event.actor),
        "action": "create",
        "detail": " ".join(info.command)[:400],
    }


def _deleted(event: Deleted) -> _Row | None:
    if event.actor is None:
        return None
    return {
        "session": event.session,
        "actor": _actor(event.actor),
        "action": "delete",
        "detail": "" if event.exit_code is None else f"exit code {event.exit_code}",
    }


def _policy(event: Any) -> _Row | None:
    """``PolicyDecided(session, rule, action, reason, request, at, would)``: every decision of the
    policy, ``ask`` and ``suggest`` too (its allow or deny is answered as an ``Acted`` too); one
    that did not act says what the rule would have done."""
    request = event.request
    return {
        "session": event.session,
        "actor": {"kind": "policy", "id": event.rule or "policy", "name": event.rule or "no rule matched"},
        "action": "policy",
        "request": None if request is None else request.model_dump(mode="json"),
        "rule": event.rule,
        "reason": event.reason,
        "detail": f"{event.action}: the policy would {event.would} this" if event.would else str(event.action),
    }


#: Which event (its ``type``) makes which row; None from the function: no row for this one.
_ROWS: dict[str, Callable[[Any], _Row | None]] = {
    "acted": _acted,
    "created": _created,
    "deleted": _deleted,
    "policy": _policy,
}


def canonical(entry: _Row) -> str:
    """The one text a row is hashed as: sorted keys, no spaces, UTF-8 kept."""
    return json.dumps(entry, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def chain_hash(prev: str, body: str) -> str:
    return hashlib.sha256((prev + body).encode()).hexdigest()


# --- the store -----------------------------------------------------------------------------------


class Ledger:
    """The ledger table in the registry's open file: appended from events, read in pages."""

    def __init__(self, db: sqlite3.Connection, *, days: int = 0, wall: Callable[[], float] = time.time) -> None:
        self.db, self.days, self.wall = db, days, wall
        self._agents: dict[str, str | None] = {}  # the agent of each session seen (a policy event names none)
        self._pruned = 0.0
        self.prune()

    def on_event(self, event: Event) -> None:
        """The engine's listener: a row for each decision, in the order they happen."""
        make = _ROWS.get(event.type)
        if make is None:
            return
        if isinstance(event, Created):  # restored ones too: their later rows name their agent
            self._agents[event.session.id] = event.session.agent
        try:
            row = make(event)
            if row is None:
                return
            sid = row["session"]
            if row.get("agent") is not None:
                self._agents[sid] = row["agent"]
            row.setdefault("agent", self._agents.get(sid))
            if row["action"] == "delete":
                self._agents.pop(sid, None)
            self.append(row)
        except Exception:  # the ledger must never take the engine down with it
            log.exception("could not write the ledger row of %s", event.type)

    def append(self, row: _Row) -> LedgerEntry:
        """Add one row at the chain's head, in one transaction; the entry as written."""
        now = self.wall()
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            first, anchor, last, head = _chain(self.db)
            seq = last + 1
            entry = LedgerEntry.model_validate({**row, "seq": seq, "at": now}).model_dump(mode="json")
            body = canonical(entry)
            digest = chain_hash(head, body)
            self.db.execute(
                "INSERT INTO ledger (seq, at, session, actor, action, body, prev, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (seq, now, entry["session"], entry["actor"]["id"], entry["action"], body, head, digest),
            )
            _set_chain(self.db, first if last else seq, anchor if last else head, seq, digest)
        if self.days and now - self._pruned >= PRUNE_EVERY_S:
            self.prune()
        return LedgerEntry.model_validate(entry)

    def prune(self) -> int:
        """Drop rows older than ``days`` (0: keep all), the anchor moved to the first kept row's
        ``prev``; the number dropped."""
        now = self._pruned = self.wall()
        if not self.days:
            return 0
        cut = now - self.days * 86_400
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            first, _, last, head = _chain(self.db)
            kept = self.db.execute("SELECT seq, prev FROM ledger WHERE at >= ? ORDER BY seq LIMIT 1", (cut,)).fetchone()
            new_first, new_anchor = (kept[0], kept[1]) if kept is not None else (last + 1, head)
            if new_first <= first:
                return 0
            dropped = self.db.execute("DELETE FROM ledger WHERE seq < ?", (new_first,)).rowcount
            _set_chain(self.db, new_first, new_anchor, last, head)
        log.info("pruned %d ledger rows older than %d days", dropped, self.days)
        return int(dropped)

    def page(self, query: LedgerQuery) -> LedgerPage:
        """The newest ``limit`` entries that match (below ``before``), oldest first."""
        where, args = _where(query)
        limit = max(1, min(query.limit, PAGE_MAX))
        rows = self.db.execute(
            f"SELECT seq, body FROM ledger {where} ORDER BY seq DESC LIMIT ?", (*args, limit + 1)
        ).fetchall()
        more = len(rows) > limit
        rows = rows[:limit][::-1]
        entries = [LedgerEntry.model_validate_json(r[1]) for r in rows]
        return LedgerPage(entries=entries, next=entries[0].seq if more and entries else None)

    def bodies_after(self, seq: int, query: LedgerQuery) -> list[tuple[int, str]]:
        """Up to ``PAGE_MAX`` rows after ``seq`` that match, oldest first: an export reads on from
        the last one (each read bounded, so a long ledger never holds the loop)."""
        return read_after(self.db, seq, query)


def read_after(db: sqlite3.Connection, seq: int, query: LedgerQuery) -> list[tuple[int, str]]:
    """(seq, canonical JSON) of up to ``PAGE_MAX`` matching rows after ``seq``, oldest first."""
    where, args = _where(query, after=seq)
    sql = f"SELECT seq, body FROM ledger {where} ORDER BY seq LIMIT ?"
    return [(int(r[0]), str(r[1])) for r in db.execute(sql, (*args, PAGE_MAX))]


def export_lines(db: sqlite3.Connection, query: LedgerQuery) -> Iterator[str]:
    """Every matching row as one JSON line, oldest first (``panewatch ledger export``)."""
    seq = 0
    while rows := read_after(db, seq, query):
        yield from (body for _, body in rows)
        seq = rows[-1][0]


#: The user of a row's actor, as the registry's index ``ledger_user`` names it (the same text, or
#: SQLite does not use the index).
_USER = "json_extract(body, '$.actor.user')"


def _where(query: LedgerQuery, after: int | None = None) -> tuple[str, tuple[Any, ...]]:
    terms: list[str] = []
    args: list[str | float] = []
    if query.session is not None:
        terms.append("session = ?")
        args.append(query.session)
    if query.actor is not None:  # a device (or token, rule, node) by its id, or a person by name
        terms.append(f"(actor = ? OR {_USER} = ?)")
        args += [query.actor, query.actor]
    if query.user is not None:
        terms.append(f"{_USER} = ?")
        args.append(query.user)
    if query.since is not None:
        terms.append("at >= ?")
        args.append(query.since)
    if query.before is not None:
        terms.append("seq < ?")
        args.append(query.before)
    if after is not None:
        terms.append("seq > ?")
        args.append(after)
    return ("WHERE " + " AND ".join(terms)) if terms else "", tuple(args)


def _chain(db: sqlite3.Connection) -> tuple[int, str, int, str]:
    """(first kept seq, anchor, newest seq, head hash); a fresh ledger: (1, genesis, 0, genesis)."""
    found = db.execute("SELECT first, anchor, last, head FROM ledger_chain WHERE id = 1").fetchone()
    return (1, GENESIS, 0, GENESIS) if found is None else (int(found[0]), str(found[1]), int(found[2]), str(found[3]))


def _set_chain(db: sqlite3.Connection, first: int, anchor: str, last: int, head: str) -> None:
    db.execute(
        "INSERT OR REPLACE INTO ledger_chain (id, first, anchor, last, head) VALUES (1, ?, ?, ?, ?)",
        (first, anchor, last, head),
    )


# --- checking ------------------------------------------------------------------------------------


def open_read_only(path: Path) -> sqlite3.Connection:
    """The registry file opened read-only (``verify`` and ``export`` never write to it)."""
    if not path.is_file():
        raise FileNotFoundError(f"no registry at {path}")
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def verify(db: sqlite3.Connection) -> tuple[int, Broken | None]:
    """Walk the chain from its anchor: (rows checked, the first broken row or None)."""
    first, anchor, last, head = _chain(db)
    expected, prev, count = first, anchor, 0
    for seq, at, session, actor, action, body, row_prev, digest in db.execute(
        "SELECT seq, at, session, actor, action, body, prev, hash FROM ledger ORDER BY seq"
    ):
        broken = _check_row(expected, prev, seq, (at, session, actor, action), body, row_prev, digest)
        if broken is not None:
            return count, broken
        expected, prev, count = seq + 1, digest, count + 1
    if expected - 1 != last:
        return count, Broken(expected, f"missing: the chain's head says the newest row is {last}")
    if prev != head:
        return count, Broken(last, "its hash is not the chain's head: it was edited or replaced")
    return count, None


def _check_row(
    expected: int, prev: str, seq: int, columns: tuple[Any, ...], body: str, row_prev: str, digest: str
) -> Broken | None:
    if seq != expected:
        return Broken(expected, f"missing (the next row kept is {seq})")
    if row_prev != prev:
        return Broken(seq, "does not follow the row before it (a row was removed or replaced)")
    if chain_hash(prev, body) != digest:
        return Broken(seq, "edited: its hash does not match its content")
    try:
        entry = json.loads(body)
        shown = (entry["at"], entry["session"], entry["actor"]["id"], entry["action"])
    except (ValueError, KeyError, TypeError):
        return Broken(seq, "its content is not a ledger entry")
    if entry.get("seq") != seq or shown != columns:
        return Broken(seq, "edited: its columns differ from its hashed content")
    return None
