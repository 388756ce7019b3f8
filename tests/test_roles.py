"""People and roles (#30 item 4) through the app on the memory host (ASGI transport, no process):
a viewer is refused every write with the role it lacks, an operator every owner's route, an
owner nothing; a session restricted to named users is hidden from the others and refused to
them (HTTP 403, WebSocket 4403); the ledger names the user and the device of every write; users
are kept in the registry, and devices paired before users belong to an owner called default."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import websockets

from live import memory_server
from panes_support import ERASE_PROMPT, PROMPT, WORKING
from panewatch.access.devices import Devices
from panewatch.access.roles import ROUTE_ROLES, Role, needed
from panewatch.access.users import DEFAULT_USER, Users
from panewatch.registry import Registry

#: How long a socket is waited on for what a test expects (a close, a snapshot) before it fails.
WAIT_S = 30.0

pytestmark = pytest.mark.unit


@pytest.fixture
async def live():
    async with memory_server() as server:
        yield server


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def device(live, user: str, role: str | None = None, name: str = "phone") -> tuple[str, dict[str, str]]:
    """Pair a device for ``user`` (made with ``role``): its id and its bearer header."""
    body = {"user": user} | ({"role": role} if role else {})
    r = await live.http.post("/api/devices/pair", json=body)
    assert r.status_code == 201, r.text
    assert r.json()["user"] == user
    async with live.client() as anonymous:
        r = await anonymous.post("/pair", json={"code": r.json()["code"], "name": name})
    assert r.status_code == 201, r.text
    return r.json()["device"]["id"], bearer(r.json()["token"])


async def blocked_session(live, **body) -> str:
    s = await live.create(agent="claude", command=["agent"], rows=12, cols=60, **body)
    agent = live.host.handles[s["id"]]
    agent.emit(WORKING)
    await live.settle()
    agent.emit(PROMPT)
    await live.settle()
    await live.settle()
    return str(s["id"])


def refused(r, need: str, have: str) -> bool:
    return r.status_code == 403 and r.json() == {"detail": f"needs role {need} (you are {have})"}


async def test_a_viewer_sees_but_every_write_to_a_pane_is_a_403_naming_operator(live):
    sid = await blocked_session(live)
    _, viewer = await device(live, "vera", "viewer")
    async with live.client(headers=viewer) as http:
        assert (await http.get("/api/sessions")).json()["sessions"][0]["id"] == sid
        assert (await http.get(f"/api/sessions/{sid}/screen")).status_code == 200
        assert (await http.get("/api/ledger")).status_code == 200
        assert (await http.get("/api/me")).json() == {
            **(await http.get("/api/me")).json(),
            "user": "vera",
            "role": "viewer",
        }
        writes = [
            http.post(f"/api/sessions/{sid}/answer", json={"option": 1, "confirm": True}),
            http.post(f"/api/sessions/{sid}/answer", json={"keys": "1", "confirm": True}),
            http.post(f"/api/sessions/{sid}/send", json={"text": "hi"}),
            http.post("/api/sessions", json={"command": ["sh"]}),
            http.delete(f"/api/sessions/{sid}"),
            http.post(f"/api/sessions/{sid}/resize", json={"rows": 10, "cols": 40}),
            http.patch(f"/api/sessions/{sid}", json={"name": "x"}),
        ]
        for call in writes:
            assert refused(await call, "operator", "viewer")
        assert refused(await http.post("/api/policy/pause"), "owner", "viewer")
        # a viewer still gets told: its own push subscriptions are not a write to a pane
        assert (await http.post("/api/push/seen", json={"sessions": [sid]})).status_code == 204
    assert live.host.handles[sid].input == b""  # nothing reached the pane


async def test_an_operator_works_the_panes_but_policy_devices_and_users_need_owner(live):
    sid = await blocked_session(live)
    _, operator = await device(live, "otto", "operator")
    live.host.handles[sid].on_input = lambda data: live.host.handles[sid].emit(ERASE_PROMPT + WORKING)
    async with live.client(headers=operator) as http:
        r = await http.post(f"/api/sessions/{sid}/answer", json={"option": 1, "confirm": True})
        assert r.status_code == 200 and r.json()["took"] is True
        r = await http.post("/api/sessions", json={"agent": "claude", "command": ["agent"]})
        assert r.status_code == 201
        assert (await http.delete(f"/api/sessions/{r.json()['id']}")).status_code == 200
        owners_only = [
            http.post("/api/policy/pause"),
            http.post("/api/policy/resume"),
            http.get("/api/devices"),
            http.post("/api/devices/pair", json={}),
            http.delete("/api/devices/abcdef12"),
            http.get("/api/users"),
            http.post("/api/users", json={"name": "eve", "role": "owner"}),
            http.patch("/api/users/otto", json={"role": "owner"}),
            http.delete("/api/users/otto"),
            http.put(f"/api/sessions/{sid}/users", json={"users": ["otto"]}),
        ]
        for call in owners_only:
            assert refused(await call, "owner", "operator")
    assert live.engine.policy.status()["paused"] is False


async def test_owners_manage_users_and_a_new_role_holds_at_once(live):
    _, owner = await device(live, "olga", "owner")
    _, phone = await device(live, "vera", "viewer")
    async with live.client(headers=owner) as http:
        r = await http.post("/api/users", json={"name": "sam", "role": "operator"})
        assert r.status_code == 201 and r.json() == {**r.json(), "name": "sam", "role": "operator", "devices": []}
        assert (await http.post("/api/users", json={"name": "sam"})).status_code == 409
        assert (await http.post("/api/users", json={"name": "Not Ok"})).status_code == 422
        assert (await http.patch("/api/users/nobody", json={"role": "viewer"})).status_code == 404
        assert (await http.patch("/api/users/vera", json={"role": "boss"})).status_code == 422
        listed = {u["name"]: u for u in (await http.get("/api/users")).json()["users"]}
        assert {n: u["role"] for n, u in listed.items()} == {"olga": "owner", "vera": "viewer", "sam": "operator"}
        assert [d["name"] for d in listed["vera"]["devices"]] == ["phone"]
        assert (await http.get("/api/devices")).json()["devices"][1]["user"] == "vera"
        async with live.client(headers=phone) as vera:
            assert refused(await vera.post("/api/sessions", json={"command": ["sh"]}), "operator", "viewer")
            assert (await http.patch("/api/users/vera", json={"role": "operator"})).json()["role"] == "operator"
            assert (await vera.post("/api/sessions", json={"command": ["sh"]})).status_code == 201
            # removing a user revokes its devices at once
            r = await http.delete("/api/users/vera")
            assert r.status_code == 200 and len(r.json()["revoked"]) == 1
            assert (await vera.get("/api/sessions")).status_code == 401
    # the API token acts as owner
    assert (await live.http.get("/api/users")).status_code == 200
    assert (await live.http.get("/api/me")).json()["role"] == "owner"


async def test_a_restricted_session_is_hidden_from_and_refused_to_other_users(live):
    _, alice = await device(live, "alice", "operator")
    _, bob = await device(live, "bob", "operator")
    async with live.client(headers=alice) as http:
        r = await http.post("/api/sessions", json={"command": ["sh"], "users": []})
        open_sid = r.json()["id"]
        r = await http.post("/api/sessions", json={"command": ["sh"], "users": ["alice"]})
        assert r.status_code == 201
        mine = r.json()["id"]
        assert {s["id"] for s in (await http.get("/api/sessions")).json()["sessions"]} == {open_sid, mine}
        assert (await http.get(f"/api/sessions/{mine}/users")).json() == {"session": mine, "users": ["alice"]}
    async with live.client(headers=bob) as http:
        assert [s["id"] for s in (await http.get("/api/sessions")).json()["sessions"]] == [open_sid]
        for call in (
            http.get(f"/api/sessions/{mine}"),
            http.get(f"/api/sessions/{mine}/screen"),
            http.post(f"/api/sessions/{mine}/send", json={"text": "x"}),
            http.delete(f"/api/sessions/{mine}"),
        ):
            r = await call
            assert r.status_code == 403 and "restricted to named users" in r.json()["detail"], r.text
        assert all(e["session"] != mine for e in (await http.get("/api/ledger")).json()["entries"])
        assert mine not in (await http.get("/api/ledger.jsonl")).text
        async with live.ws("/ws/state", token=bob["Authorization"][7:]) as ws:
            snapshot = json.loads(await ws.recv())
            assert [s["id"] for s in snapshot["sessions"]] == [open_sid]
        with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
            async with live.ws(f"/ws/sessions/{mine}/screen", token=bob["Authorization"][7:]) as ws:
                await ws.recv()
        assert closed.value.rcvd.code == 4403 and "restricted" in closed.value.rcvd.reason
    # owners see every session, and open it to everyone again
    assert mine in {s["id"] for s in (await live.http.get("/api/sessions")).json()["sessions"]}
    r = await live.http.put(f"/api/sessions/{mine}/users", json={"users": []})
    assert r.json()["users"] == []
    async with live.client(headers=bob) as http:
        assert (await http.get(f"/api/sessions/{mine}")).status_code == 200
    assert (await live.http.post("/api/sessions", json={"command": ["sh"], "users": ["nobody"]})).status_code == 404
    # a deleted session's restriction goes with it
    await live.http.put(f"/api/sessions/{mine}/users", json={"users": ["alice"]})
    assert (await live.http.delete(f"/api/sessions/{mine}")).status_code == 200
    assert live.app.state.users.restricted_to(mine) == frozenset()


async def test_a_viewer_typing_into_a_terminal_is_closed_with_4403_and_the_missing_role(live):
    sid = await blocked_session(live)
    _, viewer = await device(live, "vera", "viewer")
    closed = await closed_at_first_key(live, sid, viewer)
    assert (closed.code, closed.reason) == (4403, "needs role operator (you are viewer)")
    assert live.host.handles[sid].input == b""


async def closed_at_first_key(live, sid: str, headers: dict[str, str], before: Any = None) -> Any:
    """What closed a terminal socket opened with ``headers``' token, after the history came
    (it may watch), ``before()`` was awaited, and one key was typed."""
    with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
        async with live.ws(f"/ws/sessions/{sid}/term", token=headers["Authorization"][7:]) as ws:
            await ws.recv()  # it may watch: the history comes
            if before is not None:
                await before()
            await ws.send('{"type": "input", "data": "1"}')
            async with asyncio.timeout(WAIT_S):  # a regression fails here, never hangs
                while True:
                    await ws.recv()
    return closed.value.rcvd


async def test_the_ledger_names_the_user_and_the_device_of_every_write(live):
    dev, alice = await device(live, "alice", "operator", name="pixel")
    async with live.client(headers=alice) as http:
        r = await http.post("/api/sessions", json={"agent": "claude", "command": ["agent"], "rows": 12, "cols": 60})
        sid = r.json()["id"]
        agent = live.host.handles[sid]
        agent.emit(WORKING)
        await live.settle()
        agent.emit(PROMPT)
        await live.settle()
        await live.settle()
        agent.on_input = lambda data: agent.emit(ERASE_PROMPT + WORKING)
        assert (await http.post(f"/api/sessions/{sid}/answer", json={"option": 1, "confirm": True})).json()[
            "took"
        ] is True
        agent.on_input = None
        agent.emit(PROMPT)
        await live.settle()
        await live.settle()
        assert (await http.post(f"/api/sessions/{sid}/answer", json={"keys": "2", "confirm": True})).status_code == 200
        agent.emit(ERASE_PROMPT + WORKING)
        await live.settle()
        await http.post(f"/api/sessions/{sid}/send", json={"text": "go", "enter": False})
        assert (await http.delete(f"/api/sessions/{sid}")).status_code == 200
    entries = (await live.http.get("/api/ledger", params={"session": sid})).json()["entries"]
    assert [e["action"] for e in entries] == ["create", "answer", "answer", "send", "delete"]
    for entry in entries:
        assert entry["actor"] == {"kind": "device", "id": dev, "name": "pixel", "user": "alice"}
    token_row = (await live.http.post("/api/sessions", json={"command": ["sh"]})).json()["id"]
    (row,) = (await live.http.get("/api/ledger", params={"session": token_row})).json()["entries"]
    assert row["actor"] == {"kind": "token", "id": "token", "name": "API token"}  # no user: none named


def test_devices_paired_before_users_belong_to_an_owner_called_default(tmp_path: Path):
    registry = Registry.in_state_dir(tmp_path)
    devices = Devices(registry.db)
    code, _ = devices.new_code()
    phone, _ = devices.pair(code, "old phone")
    for table in ("users", "device_users", "session_users"):
        registry.db.execute(f"DROP TABLE {table}")
    registry.db.execute("PRAGMA user_version=5")
    registry.close()
    registry = Registry.in_state_dir(tmp_path)  # migrated to format 6
    users = Users(registry.db)
    user = users.user_of(phone.id)
    assert user is not None and (user.name, user.role) == (DEFAULT_USER, Role.owner)
    users.add("amy", Role.viewer)
    users.restrict("s1", ["amy"])
    registry.close()
    again = Users(sqlite3.connect(tmp_path / "sessions.sqlite3"))  # kept in the file
    assert again.get("amy").role == Role.viewer and again.restricted_to("s1") == {"amy"}
    assert again.may_see("s1", "amy", Role.viewer) and not again.may_see("s1", "bob", Role.operator)
    assert again.may_see("s1", None, Role.owner)


def test_the_mapping_names_writes_and_closes_the_rest_to_owners():
    assert needed("POST", "/api/sessions/{sid}/answer") == Role.operator
    assert needed("GET", "/api/sessions/{sid}/screen") == Role.viewer
    assert needed("WS", "/ws/state") == Role.viewer
    assert needed("POST", "/api/some/new/route") == Role.owner  # unnamed writes: owners only
    assert needed("GET", "/api/users") == Role.owner
    assert all(isinstance(role, Role) for role in ROUTE_ROLES.values())


async def test_the_ledgers_actor_filter_names_a_person_or_one_device(live):
    pixel, on_pixel = await device(live, "alice", "operator", name="pixel")
    laptop, on_laptop = await device(live, "alice", "operator", name="laptop")
    _, on_phone = await device(live, "bob", "operator", name="phone")
    made: dict[str, str] = {}
    for label, headers in (("pixel", on_pixel), ("laptop", on_laptop), ("phone", on_phone)):
        async with live.client(headers=headers) as http:
            r = await http.post("/api/sessions", json={"command": ["sh"], "name": label})
            made[label] = r.json()["id"]
    made["token"] = (await live.http.post("/api/sessions", json={"command": ["sh"]})).json()["id"]

    async def sessions(path: str = "/api/ledger", **params: str) -> set[str]:
        r = await live.http.get(path, params=params)
        assert r.status_code == 200, r.text
        if path.endswith(".jsonl"):
            return {json.loads(line)["session"] for line in r.text.splitlines()}
        return {e["session"] for e in r.json()["entries"]}

    # a person: every device of theirs; a device: that device alone; the token and the rest by id
    assert await sessions(actor="alice") == {made["pixel"], made["laptop"]}
    assert await sessions(actor=pixel) == {made["pixel"]}
    assert await sessions(actor=laptop) == {made["laptop"]}
    assert await sessions(actor="bob") == {made["phone"]}
    assert await sessions(actor="token") == {made["token"]}
    # ?user= names people only; both filters and the session filter hold together
    assert await sessions(user="alice") == {made["pixel"], made["laptop"]}
    assert await sessions(user=pixel) == set()
    assert await sessions(user="alice", actor=laptop) == {made["laptop"]}
    assert await sessions(actor="alice", session=made["phone"]) == set()
    assert await sessions("/api/ledger.jsonl", actor="alice") == {made["pixel"], made["laptop"]}
    assert await sessions("/api/ledger.jsonl", user="bob") == {made["phone"]}
    assert (await live.http.get("/api/ledger", params={"user": ""})).status_code == 422
    # the person's rows are read through the registry's index, not a walk of every row
    db = live.app.state.ledger.db
    plan = " ".join(
        str(row[-1])
        for row in db.execute(
            "EXPLAIN QUERY PLAN SELECT seq FROM ledger WHERE json_extract(body, '$.actor.user') = ? ORDER BY seq DESC",
            ("alice",),
        )
    )
    assert "ledger_user" in plan, plan


async def test_owners_read_every_restriction_and_cannot_remove_themselves_or_open_a_session_by_a_removal(live):
    _, olga = await device(live, "olga", "owner")
    _, vera = await device(live, "vera", "viewer")
    sid = (await live.http.post("/api/sessions", json={"command": ["sh"], "users": ["vera"]})).json()["id"]
    opened = (await live.http.post("/api/sessions", json={"command": ["sh"]})).json()["id"]
    async with live.client(headers=olga) as http:
        assert (await http.get("/api/users")).json()["restricted"] == {sid: ["vera"]}  # open ones not listed
        assert opened not in (await http.get("/api/users")).json()["restricted"]
        r = await http.delete("/api/users/olga")
        assert r.status_code == 409 and r.json()["detail"].startswith("olga is you: removing it would revoke")
        assert (await http.get("/api/me")).status_code == 200  # nothing was revoked
        # vera alone sees it: removing her would open it to everyone, so it is refused until it is not
        r = await http.delete("/api/users/vera")
        assert r.status_code == 409, r.text
        assert r.json()["detail"] == (
            f"vera is the only user session {sid} is restricted to: removing vera would open it to everyone; "
            "restrict it to someone else or open it first"
        )
        await live.http.post("/api/users", json={"name": "sam", "role": "viewer"})
        await http.put(f"/api/sessions/{sid}/users", json={"users": ["vera", "sam"]})
        assert (await http.delete("/api/users/vera")).json()["removed"] == "vera"
        assert (await http.get("/api/users")).json()["restricted"] == {sid: ["sam"]}
    async with live.client(headers=vera) as http:
        assert (await http.get("/api/sessions")).status_code == 401
    # the API token is no user: it removes any, the last owner too (it stays an owner itself)
    assert (await live.http.delete("/api/users/olga")).status_code == 200


async def next_snapshot(ws) -> list[str]:
    """The session ids of the next snapshot on a /ws/state socket (events between passed over)."""
    async with asyncio.timeout(WAIT_S):
        while (msg := json.loads(await ws.recv()))["type"] != "snapshot":
            pass
    return [s["id"] for s in msg["sessions"]]


async def test_a_restriction_made_while_a_user_watches_takes_its_session_off_their_streams(live):
    _, bob = await device(live, "bob", "viewer")
    await live.http.post("/api/users", json={"name": "alice", "role": "operator"})
    sid = (await live.http.post("/api/sessions", json={"command": ["sh"]})).json()["id"]
    other = (await live.http.post("/api/sessions", json={"command": ["sh"]})).json()["id"]
    token = bob["Authorization"][7:]
    async with live.ws("/ws/state", token=token) as state:
        assert set(await next_snapshot(state)) == {sid, other}
        with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
            async with live.ws(f"/ws/sessions/{sid}/screen", token=token) as screen:
                await screen.recv()  # it watches: a frame
                assert (await live.http.put(f"/api/sessions/{sid}/users", json={"users": ["alice"]})).status_code == 200
                async with asyncio.timeout(WAIT_S):  # a regression fails here, never hangs
                    while True:
                        await screen.recv()
        assert closed.value.rcvd.code == 4403 and "restricted to named users now" in closed.value.rcvd.reason
        assert await next_snapshot(state) == [other]  # gone from bob's list at once, no reconnect
        await live.http.put(f"/api/sessions/{sid}/users", json={"users": []})
        assert set(await next_snapshot(state)) == {sid, other}  # and back when lifted
        await live.http.put(f"/api/sessions/{sid}/users", json={"users": ["bob"]})
        assert set(await next_snapshot(state)) == {sid, other}  # restricted to bob himself: still his
    assert live.app.state.users._watchers == []  # every socket let go of its watch


async def test_an_owner_made_viewer_while_watching_loses_the_sessions_restricted_to_others(live):
    _, olga = await device(live, "olga", "owner")
    await live.http.post("/api/users", json={"name": "alice", "role": "operator"})
    sid = (await live.http.post("/api/sessions", json={"command": ["sh"], "users": ["alice"]})).json()["id"]
    async with live.ws("/ws/state", token=olga["Authorization"][7:]) as state:
        assert await next_snapshot(state) == [sid]  # owners see every session
        assert (await live.http.patch("/api/users/olga", json={"role": "viewer"})).status_code == 200
        assert await next_snapshot(state) == []  # the socket opened as an owner's follows the new role
        await live.http.patch("/api/users/olga", json={"role": "owner"})
        assert await next_snapshot(state) == [sid]


async def test_an_operator_made_viewer_with_a_terminal_open_is_closed_at_its_next_key(live):
    sid = await blocked_session(live)
    _, otto = await device(live, "otto", "operator")

    async def made_viewer() -> None:
        assert (await live.http.patch("/api/users/otto", json={"role": "viewer"})).status_code == 200

    closed = await closed_at_first_key(live, sid, otto, made_viewer)
    assert (closed.code, closed.reason) == (4403, "needs role operator (you are viewer)")
    assert live.host.handles[sid].input == b""
