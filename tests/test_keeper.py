"""The registry behind the engine on the pty host: sessions are recorded from engine events; after
a killed server, the next engine shows them again under their ids (lost, or exited with their
code) with their last screen, and checks reports against the kept token hash."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from engine_support import memory_rig
from panes_support import IDLE, PROMPT
from panewatch.engine import Engine
from panewatch.hosts.pty import PtyHost
from panewatch.keeper import STATE_SAVE_S, Keeper
from panewatch.manifest import ManifestStore, bundled_manifest_dir
from panewatch.registry import Registry, hash_token
from panewatch.session import SessionSpec


def engine(state: Path) -> Engine:
    return Engine(
        ManifestStore.from_dirs(bundled_manifest_dir()),
        host=PtyHost(),
        sweep_ms=50,
        keeper=Keeper(Registry.in_state_dir(state)),
    )


async def until(check, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_pty_sessions_come_back_lost_or_exited_with_their_screen(tmp_path: Path) -> None:
    first = engine(tmp_path)
    await first.start()
    live = first.create(SessionSpec(command=[sys.executable, "-c", "print('STILL-HERE'); input()"], name="live"))
    done = first.create(SessionSpec(command=["sh", "-c", "echo GONE-NOW; exit 5"], name="done"))
    await until(lambda: "STILL-HERE" in "\n".join(first.screen(live["id"])["rows"]))
    await until(lambda: first.get(done["id"])["state"] == "exited")
    await until(lambda: first.get(live["id"])["state"] == "idle")
    await asyncio.sleep(2.5)  # the screens are saved every 2 s
    token = first.report_token(live["id"])
    record = first.keeper.registry.get(live["id"])
    assert record.token_hash == hash_token(token) and record.host_kind == "pty" and record.host_ref
    # the server is killed: nothing more reaches the registry, the agents are left behind
    first.keeper.close()
    first.keeper = None

    second = engine(tmp_path)
    await second.start()
    try:
        by_name = {s["name"]: s for s in second.list()}
        assert by_name["live"]["id"] == live["id"] and by_name["live"]["state"] == "lost"
        assert "end with the server" in by_name["live"]["why"]
        assert "STILL-HERE" in "\n".join(second.screen(live["id"])["rows"])
        assert (by_name["done"]["state"], by_name["done"]["exit_code"]) == ("exited", 5)
        assert "GONE-NOW" in "\n".join(second.screen(done["id"])["rows"])
        assert second.report_token_matches(live["id"], token)  # the kept hash checks the old token
        assert not second.report_token_matches(live["id"], "wrong")
        await second.delete(done["id"])
        assert second.keeper.registry.get(done["id"]) is None
    finally:
        await second.stop()
        await first.stop()


async def test_state_changes_reach_the_registry_together_within_state_save_s(tmp_path: Path) -> None:
    # a state change is not a write of its own on the engine's read path: it waits, at most
    # STATE_SAVE_S, for the others, and all go in one transaction; stopping writes what is left
    keeper = Keeper(Registry.in_state_dir(tmp_path))
    writes: list[int] = []
    update_many = keeper.registry.update_many
    keeper.registry.update_many = lambda rows: (writes.append(len(rows)), update_many(rows))[1]  # type: ignore[method-assign]
    async with memory_rig(keeper=keeper) as rig:
        a, agent_a = rig.create()
        b, agent_b = rig.create()
        await rig.settle(0.2)
        flushed = len(writes)
        agent_a.emit(PROMPT)
        agent_b.exit(3)
        await rig.settle(0.2)
        assert rig.engine.get(a)["state"] == "blocked" and rig.engine.get(b)["state"] == "exited"
        assert len(writes) == flushed  # not yet: both wait for the flush
        assert keeper.registry.get(b).state != "exited"
        await rig.settle(STATE_SAVE_S)
        assert writes[flushed:] == [2]  # both sessions, one transaction
        assert keeper.registry.get(a).state == "blocked"
        assert (keeper.registry.get(b).state, keeper.registry.get(b).exit_code) == ("exited", 3)
        assert "Do you want to proceed?" in keeper.registry.get(a).last_screen
        agent_a.emit(IDLE)
        await rig.settle(0.2)
    # the engine stopped before the flush was due: what was left was written on the way out
    reopened = Registry.in_state_dir(tmp_path)
    assert reopened.get(a).state == rig.engine.get(a)["state"] != "blocked"
