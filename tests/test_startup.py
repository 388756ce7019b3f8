"""Start-up is not idle: a blank screen before the agent drew anything its manifest knows.

Gemini CLI draws nothing for 1–3 s after launch and Codex for ~0.4 s; a screen no rule matches
reads idle, so those panes said "waiting for you" (and could fire "done") before the agent
was there. A manifest's ``startup_timeout`` keeps such a screen ``working`` with source
``start`` until a rule matched once or the timeout passed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine_support import memory_rig
from panewatch.manifest import ManifestStore, Verdict
from panewatch.panes.signals import combine

pytestmark = pytest.mark.unit

MANIFEST = """
agent = "slowstart"
version = "1"
startup_timeout = {timeout}
[[rules]]
name = "prompt"
state = "idle"
why = "its prompt"
any = ['^READY>']
[[rules]]
name = "busy"
state = "working"
why = "busy"
any = ['^BUSY']
"""


def test_combine_reads_an_unknown_screen_as_starting_only_while_starting() -> None:
    def read(verdict: Verdict, starting: bool) -> tuple:
        d = combine(verdict, starting=starting)
        return d.state, d.source, d.rule

    nothing = Verdict("idle", None, "no rule matched")
    assert read(nothing, True) == ("working", "start", None)
    assert read(nothing, False) == ("idle", "screen", None)
    # a rule that matched decides even during start-up
    assert read(Verdict("idle", "prompt", "p"), True) == ("idle", "screen", "prompt")
    assert read(Verdict("blocked", "dialog", "d"), True) == ("blocked", "screen", "dialog")


def _store(tmp_path: Path, timeout: float) -> ManifestStore:
    (tmp_path / "slowstart.toml").write_text(MANIFEST.format(timeout=timeout))
    return ManifestStore.from_dirs(tmp_path)


async def test_blank_screen_is_working_until_the_prompt_is_drawn(tmp_path: Path) -> None:
    async with memory_rig(store=_store(tmp_path, timeout=10)) as rig:
        notes: list = []
        rig.engine.notifier.subscribe(notes.append)
        sid, agent = await rig.create(agent="slowstart")
        for _ in range(9):  # 0.9 s of a blank screen, read at every sweep
            await rig.settle(0.1)
            info = await rig.engine.get(sid)
            assert (info.state, info.source) == ("working", "start")
        agent.emit("READY>")
        await rig.settle(0.1)
        info = await rig.engine.get(sid)
        assert (info.state, info.source, info.rule) == ("idle", "screen", "prompt")
    assert notes == [], "a launch is not a finished turn"


async def test_a_screen_never_known_is_idle_once_the_timeout_passed(tmp_path: Path) -> None:
    async with memory_rig(store=_store(tmp_path, timeout=0.6)) as rig:
        sid, _ = await rig.create(agent="slowstart")
        await rig.settle(0.5)
        assert ((await rig.engine.get(sid)).state, (await rig.engine.get(sid)).source) == ("working", "start")
        await rig.settle(0.2)  # the timeout passed at 0.6 s: the next sweep reads it idle
        info = await rig.engine.get(sid)
        assert (info.state, info.source, info.rule) == ("idle", "screen", None)


async def test_after_the_first_match_an_unknown_screen_is_idle_again(tmp_path: Path) -> None:
    async with memory_rig(store=_store(tmp_path, timeout=30)) as rig:
        sid, agent = await rig.create(agent="slowstart")
        agent.emit("BUSY")
        await rig.settle(0.2)
        assert ((await rig.engine.get(sid)).state, (await rig.engine.get(sid)).source) == ("working", "screen")
        agent.emit("\x1b[2J\x1b[H")  # a rule matched once: a blank screen is no longer the start-up
        await rig.settle(0.2)
        assert ((await rig.engine.get(sid)).state, (await rig.engine.get(sid)).source) == ("idle", "screen")
