"""An agent's own desktop notifications (OSC 9 / 99 / 777) in the notification stream: a typed
event, a bounded notification through the notifier's sinks, cleaned text; on the memory host
with a hand-moved clock, then through a real server with a real PTY to a webhook on loopback."""

from __future__ import annotations

import asyncio
import json

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from engine_support import memory_rig
from live import live_server, next_event
from panewatch.clock import ManualClock
from panewatch.engine.events import Desktop, Event, Notified
from panewatch.sinks.notify import DESKTOP_BURST, Notifier, clean
from panewatch_lab.loopback import Loopback


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def desktop(n: Notifier, body: str, title: str = "", session: str = "s1", protocol: str = "osc9"):
    return n.on_desktop(
        session=session, name="pane", agent="codex", state="working", protocol=protocol, title=title, body=body
    )


@pytest.mark.unit
def test_a_desktop_notification_carries_its_protocol_text_and_source():
    got = []
    n = Notifier(clock=Clock(), wall=lambda: 5.0)
    n.subscribe(got.append)
    note = desktop(n, "Approval needed", title="Codex", protocol="osc777")
    assert note is not None and got == [note]
    assert (note.kind, note.protocol, note.source, note.state) == ("desktop", "osc777", "oob", "working")
    assert (note.title, note.body) == ("pane: Codex", "Approval needed")
    env = note.as_env()
    assert env["PANEWATCH_KIND"] == "desktop" and env["PANEWATCH_PROTOCOL"] == "osc777"
    untitled = desktop(n, "build done")
    assert untitled is not None and untitled.title == "pane (codex)"


@pytest.mark.unit
def test_a_pane_spamming_desktop_notifications_is_bounded_per_session():
    clock = Clock()
    n = Notifier(clock=clock, cooldown=30)
    assert desktop(n, "build done") is not None
    assert desktop(n, "build done") is None, "the same text again within the cooldown"
    sent = [desktop(n, f"line {i}") for i in range(20)]
    assert sum(s is not None for s in sent) == DESKTOP_BURST - 1
    assert desktop(n, "line 0", session="s2") is not None, "the bound is per session"
    assert n.suppressed == 1 + 20 - (DESKTOP_BURST - 1)
    clock.t += 30
    assert desktop(n, "build done") is not None, "a new window"
    n.forget("s1")
    assert desktop(n, "build done") is not None, "a deleted session's history goes with it"


@pytest.mark.unit
def test_state_notifications_are_not_taken_by_the_desktop_bound():
    n = Notifier(clock=Clock())
    for i in range(DESKTOP_BURST + 2):
        desktop(n, f"spam {i}")
    note = n.on_transition(
        session="s1", name="pane", agent="codex", prev="working", state="blocked", source="screen", rule="r", why="w"
    )
    assert note is not None and note.kind == "state"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("raw", "limit", "want"),
    [
        ("build\x1b[31m done\x07", 50, "build[31m done"),  # ESC and BEL dropped, nothing runs
        ("a\u202eevil\u200b txt", 50, "aevil txt"),  # bidi override and zero-width dropped
        ("  many \t\n  spaces  ", 50, "many spaces"),
        ("x" * 500, 10, "x" * 9 + "\u2026"),
    ],
)
def test_text_is_cleaned(raw: str, limit: int, want: str):
    assert clean(raw, limit) == want


async def settle(clock: ManualClock) -> None:
    for _ in range(3):
        await asyncio.sleep(0)
        clock.advance(0.1)


@pytest.mark.unit
@pytest.mark.parametrize("backend", ["pyte", "ghostty"])
async def test_the_engine_turns_osc_notifications_into_events_and_notifications(backend: str):
    if backend == "ghostty":
        pytest.importorskip("pyghostty", reason="the Ghostty screen needs the pyghostty wheel")
    clock = ManualClock()
    notifier = Notifier(clock=clock.time, wall=clock.time)
    async with memory_rig(clock, notifier=notifier, backend=backend) as rig:
        engine = rig.engine
        events: list[Event] = []
        engine.subscribe(events.append)
        sid, agent = await rig.create(agent="codex")
        agent.emit(b"\x1b]9;build done\x07\x1b]777;notify;Codex;Approval\tneeded \xe2\x80\xae!\x07hello\r\n")
        agent.emit(b"\x1b]99;i=1:p=title;Kitty\x1b\\")
        await settle(clock)
        agent.emit(b"".join(b"\x1b]9;spam %d\x07" % i for i in range(30)))
        await settle(clock)
        raw = [e for e in events if isinstance(e, Desktop)]
        assert [(e.protocol, e.title, e.body) for e in raw[:3]] == [
            ("osc9", "", "build done"),
            ("osc777", "Codex", "Approval needed !"),
            ("osc99", "Kitty", ""),
        ]
        assert all(e.session == sid and e.as_dict()["source"] == "oob" for e in raw)
        assert len(raw) == 3 + 20, "every one, as far as the screen keeps them between two feeds"
        sent = [e.notification for e in events if isinstance(e, Notified) and e.notification["kind"] == "desktop"]
        assert [(s["protocol"], s["body"]) for s in sent] == [
            ("osc9", "build done"),
            ("osc777", "Approval needed !"),
            ("osc99", ""),
        ], "the rest of the burst is dropped"
        assert notifier.suppressed == 20
        assert "hello" in "\n".join((await engine.screen(sid)).rows)
        explained = (await engine.explain(sid)).signals.out_of_band.notifications
        assert explained[-1].model_dump() == {"protocol": "osc9", "title": "", "body": "spam 29"}, (
            "/explain keeps the last few"
        )


@pytest.mark.integration
async def test_a_real_pty_printf_osc9_reaches_a_webhook_and_the_state_stream():
    received: list[dict] = []

    async def hook(request: Request) -> JSONResponse:
        received.append(json.loads(await request.body()))
        return JSONResponse({"ok": True})

    sink = Loopback()
    async with (
        sink.serving(Starlette(routes=[Route("/hook", hook, methods=["POST"])]), "error"),
        live_server(notify_webhook=f"{sink.url}/hook") as live,
        live.ws("/ws/state") as ws,
    ):
        script = "sleep 0.3; printf '\\033]9;build done\\007'; sleep 30"
        s = await live.create(command=["bash", "--norc", "--noprofile", "-c", script], rows=24, cols=80)
        note = await next_event(ws, "notification", session=s["id"], protocol="osc9")
        assert (note["kind"], note["source"], note["body"]) == ("desktop", "oob", "build done")
        for _ in range(100):
            desktop_posts = [r for r in received if r.get("kind") == "desktop"]
            if desktop_posts:
                break
            await asyncio.sleep(0.05)
        assert desktop_posts, received
        assert desktop_posts[0]["session"] == s["id"]
        assert (desktop_posts[0]["protocol"], desktop_posts[0]["body"]) == ("osc9", "build done")
        assert desktop_posts[0]["source"] == "oob"
