"""The ACP host through the pane-host seam: exact states to ``on_status`` with the message that
decided each, conversation changes to ``on_change`` (never bytes: it has no terminal), keystrokes
refused, exit with code and reason."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import pytest

from panewatch.hosts.acp import AcpHandle, AcpHost
from panewatch.hosts.base import LaunchSpec, PaneHandle, PaneHost, SpawnError, WriteRefused
from panewatch.states import State

pytestmark = pytest.mark.integration

AGENT = str(Path(__file__).with_name("acp_agent.py"))


class Sink:
    def __init__(self) -> None:
        self.statuses: list[tuple[str, str]] = []
        self.events: list[str] = []
        self.exits: list[tuple[int | None, str]] = []
        self.changes = 0
        self.moved = asyncio.Event()

    def on_output(self, data: bytes) -> None:
        raise AssertionError("an ACP agent has no terminal: no bytes to show")

    def on_change(self) -> None:
        self.changes += 1

    def on_exit(self, code: int | None, reason: str) -> None:
        self.exits.append((code, reason))
        self.moved.set()

    def on_status(self, state: State, why: str, event: str) -> None:
        self.statuses.append((state, why))
        self.events.append(event)
        self.moved.set()

    async def until(self, state: str, timeout: float = 10) -> str:
        async def wait() -> str:
            while True:
                if state == "exited" and self.exits:
                    return self.exits[-1][1]
                if self.statuses and self.statuses[-1][0] == state:
                    return self.statuses[-1][1]
                self.moved.clear()
                await self.moved.wait()

        return await asyncio.wait_for(wait(), timeout)


def spec(tmp_path: Path, *argv: str) -> LaunchSpec:
    return LaunchSpec("s1", (sys.executable, AGENT, *argv), str(tmp_path), {"PATH": "/usr/bin:/bin"}, 12, 80)


async def idle_agent(host: AcpHost, tmp_path: Path) -> tuple[AcpHandle, Sink]:
    """The scripted ACP agent spawned on ``host``, once it has said it is idle."""
    sink = Sink()
    handle = await host.spawn(spec(tmp_path), sink)
    await sink.until("idle")
    return handle, sink


@pytest.fixture
async def host():
    h = AcpHost()
    await h.start()
    yield h
    await h.stop()


async def test_the_host_and_handle_fit_the_seam(host, tmp_path):
    assert isinstance(host, PaneHost) and host.kind == "acp" and not host.survives_restart
    sink = Sink()
    handle = await host.spawn(spec(tmp_path), sink)
    assert isinstance(handle, PaneHandle)
    assert handle.answers_queries and handle.foreground_pgid() is None and handle.ref == str(handle.pid)
    assert await host.adopt("123", "s1", sink) is None
    await sink.until("idle")
    with pytest.raises(WriteRefused, match="prompts, answers and cancel"):
        handle.write(b"hello\r")


async def test_states_and_the_conversation(host, tmp_path):
    handle, sink = await idle_agent(host, tmp_path)
    handle.prompt("perm")
    why = await sink.until("blocked")
    assert why.startswith("session/request_permission: touch marker.txt (execute)")
    text = "\n".join(handle.client.conversation.render(80))  # in the conversation when the state went out
    assert "? Permission: touch marker.txt (execute)" in text and "[allow] Allow (allow_once)" in text
    handle.answer("allow")
    await sink.until("idle")
    assert "✓ touch marker.txt [execute, completed]" in "\n".join(handle.client.conversation.render(80))
    assert [s for s, _ in sink.statuses] == ["idle", "working", "blocked", "working", "idle"]
    assert sink.events == [
        "session/new",
        "session/prompt",
        "session/request_permission",
        "session/request_permission",
        "stopReason",
    ]
    assert sink.changes > 0  # every change of the conversation is told, for its watchers


async def test_ctrl_c_cancels_the_turn(host, tmp_path):
    handle, sink = await idle_agent(host, tmp_path)
    handle.prompt("slow")
    handle.signal(signal.SIGINT)
    assert await sink.until("idle") == "stopReason cancelled"


async def test_exit_reports_code_and_reason(host, tmp_path):
    handle, sink = await idle_agent(host, tmp_path)
    handle.prompt("crash")
    reason = await sink.until("exited")
    assert sink.exits == [(3, reason)] and "the model exploded" in reason
    assert not handle.alive
    handle.close()
    assert handle not in host.handles


async def test_a_command_that_cannot_start(host, tmp_path):
    with pytest.raises(SpawnError, match="cannot start"):
        await host.spawn(LaunchSpec("s2", ("/nonexistent/agent",), str(tmp_path), {}, 12, 80), Sink())


async def test_stop_ends_every_agent(tmp_path):
    host = AcpHost()
    sinks = [Sink() for _ in range(2)]
    handles = [await host.spawn(spec(tmp_path), s) for s in sinks]
    for s in sinks:
        await s.until("idle")
    await host.stop()
    assert all(not h.alive for h in handles)
