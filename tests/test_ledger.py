"""The ledger (#30 item 1): every decision that touched a pane is a row with its actor, what the
actor was shown and whether it took; the rows are hash-chained (an edit, a removal shows), pruned
without breaking the chain, read in pages with filters, and bad parameters are a 422 with why.

The API on the memory host and a hand-moved clock; the chain on a registry file in tmp_path."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from engine_support import TESTER, memory_rig
from live import memory_server
from panes_support import ERASE_PROMPT, IDLE, PROMPT, WORKING
from panewatch.engine import Actor, ActorKind
from panewatch.engine.events import SEEN_LINE_CHARS, SEEN_LINES, seen_lines
from panewatch.engine.models import RequestView
from panewatch.errors import Conflict
from panewatch.registry import Registry
from panewatch.sinks.ledger import Ledger, LedgerQuery, verify

pytestmark = pytest.mark.unit

PHONE = Actor(kind=ActorKind.device, id="dev-1", name="phone")


@pytest.fixture
async def live():
    async with memory_server() as server:
        yield server


async def ledger(live, **params) -> dict:
    r = await live.http.get("/api/ledger", params=params)
    assert r.status_code == 200, r.text
    return r.json()


async def blocked(live, agent) -> None:
    agent.emit(PROMPT)
    await live.settle()
    await live.settle()


async def test_every_decision_on_a_pane_is_a_row_with_its_actor_request_and_screen(live):
    s = await live.create(agent="claude", command=["agent"], rows=12, cols=60)
    sid, agent = s["id"], live.host.handles[s["id"]]
    agent.emit(WORKING)
    await live.settle()
    await blocked(live, agent)

    # a send into a blocked pane is refused (409): a row with why, nothing written
    r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": "hello"})
    assert r.status_code == 409
    # the answer: verified to have taken
    agent.on_input = lambda data: agent.emit(ERASE_PROMPT + WORKING)
    r = await live.http.post(f"/api/sessions/{sid}/answer", json={"option": 1, "confirm": True})
    assert r.status_code == 200 and r.json()["took"] is True
    # an answer to a pane that asks nothing now: refused, a row too
    r = await live.http.post(f"/api/sessions/{sid}/answer", json={"option": 2, "confirm": True})
    assert r.status_code == 409

    # keys typed by hand into the blocked pane (a device's terminal): one row per burst, with the keys
    agent.on_input = None
    await blocked(live, agent)
    live.engine.keys(sid, b"2", PHONE)
    live.clock.advance(1.5)  # the burst's window closes
    # keys into a pane that asks nothing are not decisions: no row
    agent.emit(ERASE_PROMPT + IDLE)
    await live.settle()
    live.engine.keys(sid, b"ls", PHONE)
    live.clock.advance(1.5)
    r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": "go on", "enter": False})
    assert r.status_code == 200, r.text
    r = await live.http.delete(f"/api/sessions/{sid}")
    assert r.status_code == 200

    entries = (await ledger(live))["entries"]
    rows = [(e["action"], e["actor"]["kind"], e["took"], bool(e["refused"])) for e in entries]
    assert rows == [
        ("create", "token", None, False),
        ("send", "token", False, True),
        ("answer", "token", True, False),
        ("answer", "token", False, True),
        ("keys", "device", None, False),
        ("send", "token", None, False),
        ("delete", "token", None, False),
    ]
    create, refused_send, answer, refused_answer, keys, send, delete = entries
    assert all(e["session"] == sid and e["agent"] == "claude" for e in entries)
    assert [e["seq"] for e in entries] == sorted(e["seq"] for e in entries)  # newest last
    assert "blocked" in refused_send["refused"] and refused_send["state"] == "blocked"
    assert refused_send["request"]["question"] == "Do you want to proceed?"  # what the refused actor was shown
    assert answer["option"] == 1 and answer["keys"] == "1" and answer["state"] == "blocked"
    assert answer["request"] == {
        **answer["request"],
        "tool": "Bash",
        "question": "Do you want to proceed?",
        "source": "screen",
    }
    assert "Do you want to proceed?" in "\n".join(answer["screen"])  # the screen the answer was given on
    assert "not blocked" in refused_answer["refused"] and refused_answer["option"] == 2
    assert refused_answer["request"] is None
    assert (keys["actor"], keys["keys"], keys["state"]) == (PHONE.model_dump(mode="json"), "2", "blocked")
    assert keys["request"]["tool"] == "Bash" and "touch x.txt" in "\n".join(keys["screen"])
    assert send["state"] == "idle" and send["detail"] == "5 characters"
    assert create["detail"] == "agent" and delete["detail"] == "exit code -1"  # (the memory host ends it so)
    # the rows of one actor, and of one session
    assert [e["action"] for e in (await ledger(live, actor="dev-1"))["entries"]] == ["keys"]
    assert len((await ledger(live, session=sid))["entries"]) == 7
    assert (await ledger(live, session="nope"))["entries"] == []


async def test_a_refused_resume_is_a_row_with_why(tmp_path: Path):
    registry = Registry.in_state_dir(tmp_path)
    book = Ledger(registry.db)
    async with memory_rig(registry=registry) as rig:
        rig.engine.subscribe(book.on_event)
        sid, _ = await rig.create()
        with pytest.raises(Conflict) as refused:
            await rig.engine.resume(sid, actor=TESTER)
        create, resume = book.page(LedgerQuery()).entries  # (the engine closes the registry on stop)
    assert (create.action, create.agent) == ("create", "claude")
    assert (resume.action, resume.took, resume.refused, resume.agent) == ("resume", False, str(refused.value), "claude")


async def test_keys_typed_into_a_password_prompt_are_kept_by_their_length_only(live):
    s = await live.create(command=["agent"], rows=12, cols=60)
    sid, agent = s["id"], live.host.handles[s["id"]]
    agent.emit(b"Enter passphrase for key '/root/.ssh/id_ed25519': ")
    for _ in range(3):
        await live.settle()
    agent.on_input = lambda data: agent.emit(b"\r\n$ ")
    r = await live.http.post(f"/api/sessions/{sid}/answer", json={"keys": "hunter2\r", "confirm": True})
    assert r.status_code == 200, r.text
    (entry,) = [e for e in (await ledger(live))["entries"] if e["action"] == "answer"]
    assert entry["keys"] == "(hidden: 8 characters)" and entry["detail"] == "keys"
    export = (await live.http.get("/api/ledger.jsonl")).text
    assert "hunter2" not in export


async def test_pages_go_back_from_the_newest_and_the_export_has_every_row(live):
    book: Ledger = live.app.state.ledger
    for i in range(7):
        book.append({"session": f"s{i % 2}", "agent": None, "actor": TESTER.model_dump(), "action": "send"})
    first = await ledger(live, limit=3)
    assert [e["seq"] for e in first["entries"]] == [5, 6, 7] and first["next"] == 5
    second = await ledger(live, limit=3, before=first["next"])
    assert [e["seq"] for e in second["entries"]] == [2, 3, 4] and second["next"] == 2
    last = await ledger(live, limit=3, before=second["next"])
    assert [e["seq"] for e in last["entries"]] == [1] and last["next"] is None
    s1 = await ledger(live, session="s1", limit=2)
    assert [e["seq"] for e in s1["entries"]] == [4, 6] and s1["next"] == 4
    assert (await ledger(live, since="2999-01-01T00:00:00Z"))["entries"] == []
    assert len((await ledger(live, since=0))["entries"]) == 7
    r = await live.http.get("/api/ledger.jsonl", params={"session": "s0"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/x-ndjson")
    lines = r.text.splitlines()
    assert len(lines) == 4 and all('"session":"s0"' in line for line in lines)


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 501}, "limit"),
        ({"limit": "many"}, "limit"),
        ({"before": -1}, "before"),
        ({"since": "yesterday"}, "since"),
        ({"session": ""}, "session"),
        ({"actor": "x" * 201}, "actor"),
    ],
)
async def test_bad_parameters_are_a_422_that_names_them(live, params, named):
    r = await live.http.get("/api/ledger", params=params)
    assert r.status_code == 422
    assert named in str(r.json()["detail"])


def test_seen_lines_are_the_last_visible_ones_each_cut():
    lines = [f"row {i} " + "x" * 500 for i in range(60)] + ["", "   "]
    shown = seen_lines(lines)
    assert len(shown) == SEEN_LINES and shown[0].startswith("row 20 ") and shown[-1].startswith("row 59 ")
    assert all(len(line) == SEEN_LINE_CHARS for line in shown)
    assert seen_lines(["", ""]) == ()


# --- the chain -----------------------------------------------------------------------------------


class Wall:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def filled(tmp_path: Path, rows: int = 5, wall: Wall | None = None, days: int = 0) -> tuple[Registry, Ledger]:
    registry = Registry.in_state_dir(tmp_path)
    book = Ledger(registry.db, days=days, wall=wall or Wall())
    ask = RequestView(question="Run?", tool="Bash", subject="ls", subject_kind="command", detail=None,
                      source="hook", disagrees=None)  # fmt: skip
    for i in range(rows):
        book.append({"session": "s1", "agent": "claude", "actor": TESTER.model_dump(), "action": "answer",
                     "request": ask.model_dump(), "option": 1, "took": True, "screen": [f"line {i}", "é ✓"]})  # fmt: skip
    return registry, book


def test_the_chain_verifies_and_names_the_first_edited_or_removed_row(tmp_path: Path):
    registry, _ = filled(tmp_path)
    db = registry.db
    assert verify(db) == (5, None)

    db.execute("UPDATE ledger SET body = replace(body, '\"took\":true', '\"took\":false') WHERE seq = 3")
    count, broken = verify(db)
    assert (count, broken.seq) == (2, 3) and "edited" in broken.why
    db.execute("UPDATE ledger SET body = replace(body, '\"took\":false', '\"took\":true') WHERE seq = 3")
    assert verify(db) == (5, None)  # put back as it was: intact again

    db.execute("UPDATE ledger SET session = 's2' WHERE seq = 2")  # a column, not the hashed text
    assert verify(db)[1].seq == 2
    db.execute("UPDATE ledger SET session = 's1' WHERE seq = 2")

    db.execute("DELETE FROM ledger WHERE seq = 4")
    assert str(verify(db)[1]) == "row 4: missing (the next row kept is 5)"


def test_removing_the_newest_row_shows_too(tmp_path: Path):
    registry, _ = filled(tmp_path)
    registry.db.execute("DELETE FROM ledger WHERE seq = 5")
    count, broken = verify(registry.db)
    assert count == 4 and broken.seq == 5 and "missing" in broken.why


def test_a_rewritten_row_with_a_fresh_hash_breaks_the_next_link(tmp_path: Path):
    registry, _ = filled(tmp_path)
    db = registry.db
    from panewatch.sinks.ledger import chain_hash

    prev, body = db.execute("SELECT prev, body FROM ledger WHERE seq = 2").fetchone()
    forged = body.replace('"took":true', '"took":false')
    db.execute("UPDATE ledger SET body = ?, hash = ? WHERE seq = 2", (forged, chain_hash(prev, forged)))
    assert verify(db)[1].seq == 3


def test_pruning_keeps_the_chain_verifiable_and_new_rows_follow_it(tmp_path: Path):
    wall = Wall()
    registry, book = filled(tmp_path, rows=3, wall=wall, days=2)
    wall.now += 3 * 86_400  # the three rows are older than two days now
    book.append({"session": "s2", "agent": None, "actor": TESTER.model_dump(), "action": "delete"})
    # the append pruned them (at most once an hour): the chain starts at the first kept row
    assert book.prune() == 0
    assert [r[0] for r in registry.db.execute("SELECT seq FROM ledger")] == [4]
    assert verify(registry.db) == (1, None)
    wall.now += 10 * 86_400
    assert book.prune() == 1  # every row old: the anchor is the head, and the chain still holds
    assert verify(registry.db) == (0, None)
    book.append({"session": "s3", "agent": None, "actor": TESTER.model_dump(), "action": "create"})
    assert verify(registry.db) == (1, None)
    assert [e.seq for e in book.page(LedgerQuery()).entries] == [5]


def test_a_broken_write_is_logged_and_the_engine_goes_on(tmp_path: Path, caplog):
    registry, book = filled(tmp_path, rows=1)
    registry.db.execute("DROP TABLE ledger")
    from panewatch.engine.events import Deleted

    book.on_event(Deleted("s1", None, TESTER))  # raises nothing
    assert "could not write the ledger row" in caplog.text


def test_a_policy_decision_is_a_row_and_one_that_did_not_act_says_what_it_would_have_done(tmp_path: Path):
    from panewatch.engine.events import PolicyDecided

    registry, book = filled(tmp_path, rows=0)
    book.on_event(PolicyDecided("s1", "ls", "allow", "listing files", None, 1.0))
    book.on_event(PolicyDecided("s1", "ls", "suggest", "listing files", None, 2.0, would="allow"))
    first, second = book.page(LedgerQuery()).entries
    assert (first.action, first.actor.kind, first.rule, first.reason, first.detail) == (
        "policy", "policy", "ls", "listing files", "allow",
    )  # fmt: skip
    assert second.detail == "suggest: the policy would allow this"
    assert verify(registry.db) == (2, None)


def test_a_format_4_registry_gains_the_ledger(tmp_path: Path):
    registry = Registry.in_state_dir(tmp_path)
    registry.db.execute("DROP TABLE ledger")
    registry.db.execute("DROP TABLE ledger_chain")
    registry.db.execute("PRAGMA user_version=4")
    registry.close()
    again = Registry.in_state_dir(tmp_path)
    assert again.db.execute("SELECT count(*) FROM ledger").fetchone()[0] == 0
    assert verify(again.db) == (0, None)


def test_a_format_6_registry_made_before_the_user_index_gains_it_and_keeps_its_rows(tmp_path: Path):
    registry = Registry.in_state_dir(tmp_path)
    book = Ledger(registry.db)
    alice = Actor(kind=ActorKind.device, id="dev-a", name="pixel", user="alice")
    for actor in (alice, TESTER):
        book.append({"session": "s1", "agent": None, "actor": actor.model_dump(), "action": "send"})
    registry.db.execute("DROP INDEX ledger_user")
    registry.close()
    again = Registry.in_state_dir(tmp_path)  # same format: no migration, the index made anyway
    assert again.db.execute("SELECT 1 FROM sqlite_master WHERE name = 'ledger_user'").fetchone() is not None
    assert [e.actor.id for e in Ledger(again.db).page(LedgerQuery(actor="alice")).entries] == ["dev-a"]
    assert verify(again.db) == (2, None)


async def test_appending_keeps_order_under_many_writers(tmp_path: Path):
    """Rows from many tasks on one loop each get their own seq, the chain unbroken."""
    registry, book = filled(tmp_path, rows=0)

    async def writer(n: int) -> None:
        for _ in range(20):
            book.append({"session": f"s{n}", "agent": None, "actor": TESTER.model_dump(), "action": "send"})
            await asyncio.sleep(0)

    await asyncio.gather(*(writer(n) for n in range(5)))
    assert verify(registry.db) == (100, None)
    assert sqlite3.connect(registry.path).execute("SELECT count(*) FROM ledger").fetchone()[0] == 100
