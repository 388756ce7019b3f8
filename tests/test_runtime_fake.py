"""The engine against the lab's fake agent: its own truth file says what the service must see."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import pytest

from engine_support import TESTER, fast
from panewatch.engine import Engine, SessionSpec
from panewatch.errors import Conflict
from panewatch.manifest import ManifestStore, bundled_manifest_dir
from panewatch_lab import MANIFEST_DIR

pytestmark = pytest.mark.integration


@pytest.fixture
async def engine():
    """A started engine that knows the lab's ``fake`` manifest (not bundled with the runtime)."""
    eng = Engine(ManifestStore.from_dirs(bundled_manifest_dir(), MANIFEST_DIR), options=fast())
    await eng.start()
    yield eng
    await eng.stop()


def truth(path: Path) -> list[str]:
    if not path.exists():
        return []
    return [json.loads(line)["state"] for line in path.read_text().splitlines() if line.strip()]


async def until(predicate, timeout: float = 15.0, step: float = 0.02):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(step)


async def test_fake_agent_session_follows_its_truth_through_prompts(engine, tmp_path):
    state_file = tmp_path / "truth.jsonl"
    argv = [
        sys.executable,
        "-m",
        "panewatch_lab.fake_agent",
        "--seed",
        "3",
        "--speed",
        "6",
        "--prompt-prob",
        "1",
        "--state-file",
        str(state_file),
    ]
    sid = (await engine.create(SessionSpec(agent="fake", command=argv, rows=32, cols=120), actor=TESTER)).id

    def state() -> str:
        return engine.info(sid).state

    await until(lambda: truth(state_file)[-1:] == ["idle"])
    await until(lambda: state() == "idle")
    # the agent renames itself after start; the foreground program is re-read while it prints
    await until(lambda: engine.info(sid).foreground == "fake-agent", timeout=5)
    assert (await engine.get(sid)).agent == "fake"

    answered = tasks = 0
    deadline = time.monotonic() + 60
    while (answered < 1 or tasks < 2) and time.monotonic() < deadline:
        await until(lambda: truth(state_file)[-1] == "idle" and state() == "idle")
        await engine.send(sid, f"task {tasks}", actor=TESTER)
        tasks += 1
        await until(lambda: truth(state_file)[-1] != "idle")
        while truth(state_file)[-1] != "idle":
            if truth(state_file)[-1] == "blocked":
                await until(lambda: state() == "blocked")
                info = await engine.get(sid)
                assert info.source == "screen" and info.rule
                with pytest.raises(Conflict):
                    await engine.send(sid, "ignored", actor=TESTER)
                result = await engine.answer(sid, option=1, actor=TESTER)
                assert result.took, "\n".join((await engine.screen(sid)).rows)
                answered += 1
            await asyncio.sleep(0.05)
    await until(lambda: state() == "idle", timeout=10)
    assert answered >= 1
    states = truth(state_file)
    assert "working" in states and "blocked" in states and states[-1] == "idle"
    info = await engine.get(sid)
    assert info.source == "screen" and info.rule is not None


async def test_fake_agent_exit_is_seen_and_screen_kept(engine, tmp_path):
    argv = [
        sys.executable,
        "-m",
        "panewatch_lab.fake_agent",
        "--seed",
        "1",
        "--speed",
        "20",
        "--max-tasks",
        "1",
        "--prompt-prob",
        "0",
    ]
    sid = (await engine.create(SessionSpec(agent="fake", command=argv, rows=24, cols=100), actor=TESTER)).id
    await until(lambda: engine.info(sid).state == "idle")
    await engine.send(sid, "one task", actor=TESTER)
    await until(lambda: engine.info(sid).state == "exited", timeout=30)
    assert (await engine.get(sid)).exit_code == 0
    assert any(line.strip() for line in (await engine.screen(sid)).rows)
