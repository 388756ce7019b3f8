"""Start-up is not idle: a blank screen before the agent drew anything its manifest knows.

Gemini CLI draws nothing for 1–3 s after launch and Codex for ~0.4 s; a screen no rule matches
reads idle, so those panes said "waiting for you" (and could fire "done") before the agent
was there. A manifest's ``startup_timeout`` keeps such a screen ``working`` with source
``start`` until a rule matched once or the timeout passed.
"""

from __future__ import annotations

import asyncio
import time

from panewatch.engine import Engine
from panewatch.manifest import ManifestStore, Verdict
from panewatch.session import SessionSpec
from panewatch.signals import combine

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


async def _runtime(tmp_path, timeout: float) -> Engine:
    (tmp_path / "slowstart.toml").write_text(MANIFEST.format(timeout=timeout))
    rt = Engine(ManifestStore.from_dirs(tmp_path), sweep_ms=50)
    await rt.start()
    return rt


async def _trace(rt: Engine, sid: str, seconds: float) -> list[tuple[float, str, str]]:
    seen: list[tuple[float, str, str]] = []
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        info = rt.get(sid)
        if not seen or seen[-1][1:] != (info["state"], info["source"]):
            seen.append((round(time.monotonic() - start, 2), info["state"], info["source"]))
        await asyncio.sleep(0.02)
    return seen


async def test_blank_screen_is_working_until_the_prompt_is_drawn(tmp_path) -> None:
    rt = await _runtime(tmp_path, timeout=10)
    notes: list = []
    rt.notifier.subscribe(notes.append)
    try:
        s = rt.create(
            SessionSpec(
                agent="slowstart",
                command=["bash", "--norc", "-c", "sleep 1.0; printf 'READY>'; sleep 30"],
                rows=6,
                cols=40,
            )
        )
        seen = await _trace(rt, s["id"], 1.8)
    finally:
        await rt.stop()
    states = [(state, source) for _, state, source in seen]
    assert states[0] == ("working", "start"), seen
    assert ("idle", "screen") in states, seen
    first_idle = next(t for t, state, _ in seen if state == "idle")
    assert first_idle >= 0.9, f"idle before the prompt was drawn: {seen}"
    assert all(state != "idle" for t, state, _ in seen if t < 0.9)
    assert notes == [], "a launch is not a finished turn"


async def test_a_screen_never_known_is_idle_once_the_timeout_passed(tmp_path) -> None:
    rt = await _runtime(tmp_path, timeout=0.6)
    try:
        s = rt.create(SessionSpec(agent="slowstart", command=["bash", "--norc", "-c", "sleep 30"], rows=6, cols=40))
        seen = await _trace(rt, s["id"], 1.3)
    finally:
        await rt.stop()
    assert seen[0][1:] == ("working", "start"), seen
    assert seen[-1][1:] == ("idle", "screen"), seen
    assert 0.5 <= next(t for t, state, _ in seen if state == "idle") <= 1.1, seen


async def test_after_the_first_match_an_unknown_screen_is_idle_again(tmp_path) -> None:
    rt = await _runtime(tmp_path, timeout=30)
    try:
        script = "printf 'BUSY'; sleep 0.4; printf '\\033[2J\\033[H'; sleep 30"
        s = rt.create(SessionSpec(agent="slowstart", command=["bash", "--norc", "-c", script], rows=6, cols=40))
        seen = await _trace(rt, s["id"], 1.0)
    finally:
        await rt.stop()
    assert ("working", "screen") in [x[1:] for x in seen], seen
    assert seen[-1][1:] == ("idle", "screen"), seen
