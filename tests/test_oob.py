"""Out-of-band signals: parsed from real OSC strings, placed in the signal order, shown in /explain."""

from __future__ import annotations

from pathlib import Path

import pytest

from panewatch import backends
from panewatch.manifest import Verdict
from panewatch.oob import OutOfBand
from panewatch.panes.signals import combine

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

WORKING = Verdict("working", "spinner", "s")
IDLE = Verdict("idle", "composer", "c")
BLOCKED = Verdict("blocked", "approval", "a")


@pytest.mark.unit
@pytest.mark.parametrize("backend", backends.available())
def test_codex_status_strings_as_codex_writes_them(backend: str) -> None:
    screen = backends.make_screen(backend, 4, 40)
    screen.feed(b"\x1b]7501;?\x07")  # Codex's query: not a status
    assert screen.oob.status is None
    screen.feed(b"\x1b]7501;state=blocked:app=codex:kind=permission\x07hi")
    assert (screen.oob.status.state, screen.oob.status.kind, screen.oob.status.app) == (
        "blocked",
        "permission",
        "codex",
    )
    screen.feed(b"\x1b]7501;state=done:app=codex\x1b\\")
    assert screen.oob.status.state == "idle" and screen.oob.status.raw == "done"
    screen.feed(b"\x1b]133;A\x07")
    assert screen.oob.status is None, "a shell prompt mark clears the status"
    assert screen.lines()[0] == "hi", "nothing of it is drawn"


@pytest.mark.unit
@pytest.mark.parametrize("backend", backends.available())
def test_a_string_split_across_reads_is_kept(backend: str) -> None:
    screen = backends.make_screen(backend, 4, 40)
    for part in (b"x\x1b", b"]7501;state=wor", b"king:app=codex", b"\x07y"):
        screen.feed(part)
    assert screen.oob.status is not None and screen.oob.status.state == "working"
    screen.feed(b"\x1b]9;Build " + b"z" * 300)
    screen.feed(b" done\x1b\\")
    assert screen.oob.notifications[-1].body == "Build " + "z" * 300 + " done"
    for part in (b"\x1b]777;notify;T;" + b"q" * 5000, b"q" * 20_000, b"\x07y"):  # past OSC_KEEP
        screen.feed(part)
    assert screen.oob.notified == 2 and screen.oob.notifications[-1].title == "T"
    assert screen.lines()[0] == "xyy"


@pytest.mark.unit
@pytest.mark.skipif(len(backends.available()) < 2, reason="the ghostty backend (panewatch[fast]) is not installed")
def test_both_backends_read_the_same_status_from_real_codex_output() -> None:
    """Every Codex capture, fed whole to each backend: the same last status and notifications."""
    raws = sorted((FIXTURES / "codex").glob("*/*.raw"))
    assert raws, "the Codex captures are part of the repository"
    seen = set()
    for raw in raws:
        data = raw.read_bytes()
        got = []
        for backend in ("pyte", "ghostty"):
            screen = backends.make_screen(backend, 32, 120)
            for i in range(0, len(data), 997):  # odd-sized reads split some strings
                screen.feed(data[i : i + 997])
            got.append((screen.oob.status, list(screen.oob.notifications), screen.oob.progress))
        assert got[0] == got[1], raw.name
        seen.add(got[0][0].raw if got[0][0] else None)
    assert {"blocked", "done"} <= seen, "the captures hold Codex's own statuses"


@pytest.mark.unit
def test_progress_and_notifications() -> None:
    oob = OutOfBand()
    oob.feed("9", "4;3;0")
    assert (oob.progress.state, oob.progress.value) == (3, 0)
    oob.feed("9", "4;0;0")
    assert oob.progress is None
    oob.feed("9", "Build finished")
    oob.feed("777", "notify;Codex;Approval needed")
    oob.feed("99", "i=1:d=0;Kitty says hi")
    assert [(n.protocol, n.title, n.body) for n in oob.notifications] == [
        ("osc9", "", "Build finished"),
        ("osc777", "Codex", "Approval needed"),
        ("osc99", "", "Kitty says hi"),
    ]
    oob.feed("7501", "state=nonsense")
    oob.feed("777", "")
    assert oob.status is None and oob.notified == 3


@pytest.mark.unit
def test_the_signal_order_with_a_status() -> None:
    from panewatch.oob import Status
    from panewatch.panes.signals import Report

    blocked, working, idle = (
        Status("blocked", "blocked", "permission"),
        Status("working", "working"),
        Status("idle", "done"),
    )

    def read(screen: Verdict, status, at: float = 5.0, changed: float = 1.0, report=None) -> tuple:
        d = combine(screen, status=status, status_at=at, screen_changed_at=changed, report=report, now=10.0)
        return d.state, d.source

    # 1. screen blocked beats everything
    assert read(BLOCKED, idle) == ("blocked", "screen")
    # 2. an explicit blocked status beats a working screen and a fresh hook report
    assert read(WORKING, blocked, report=Report("working", "PreToolUse", 9.0)) == ("blocked", "status")
    # 3. a fresh hook report beats a working/idle status
    assert read(IDLE, working, report=Report("idle", "Stop", 9.0)) == ("idle", "hook")
    # 4. a working status beats the screen's idle read (Codex's sub-second turns)
    assert read(IDLE, working) == ("working", "status")
    # ...but only until the screen's verdict changes after it
    assert read(IDLE, working, at=1.0, changed=2.0) == ("idle", "screen")
    assert read(IDLE, None) == ("idle", "screen")


@pytest.mark.integration
async def test_a_status_decides_through_the_engine_and_shows_in_explain(engine) -> None:
    """A pane whose program says ``state=working`` out of band and draws nothing a rule knows
    reads working with source ``status``; /explain shows the status, its age and that it counts."""
    from engine_support import TESTER, bash, wait_state
    from panewatch.engine import SessionSpec

    script = (
        r"printf '\033]7501;state=working:app=codex\007\033]777;notify;Codex;Turn started\007busy'; sleep 1; "
        r"printf '\033]7501;state=done:app=codex\007'; sleep 30"
    )
    import asyncio

    sid = (await engine.create(SessionSpec(agent="codex", command=bash(script), rows=6, cols=40), actor=TESTER)).id
    for _ in range(500):  # the first read replaces the launch's own working/start (10 s: a loaded CI)
        info = await engine.get(sid)
        if info.source != "start":
            break
        await asyncio.sleep(0.02)
    assert (info.state, info.source, info.rule) == ("working", "status", "osc7501:working"), info
    oob = (await engine.explain(sid)).signals.out_of_band
    assert oob.status is not None and oob.status.raw == "working" and oob.status.counts is True
    assert [n.model_dump() for n in oob.notifications] == [
        {"protocol": "osc777", "title": "Codex", "body": "Turn started"}
    ]
    info = await wait_state(engine, sid, "idle", timeout=5)
    assert (info.source, info.rule) == ("status", "osc7501:done"), info
