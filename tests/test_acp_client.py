"""The ACP client against a real scripted agent process: states from the protocol, guarded
answers, and every fault of the issue's list ending in a clear error or exit, never a stuck
``working``."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from panewatch.acp import AcpClient, Busy, Gone, NotOffered, Timeouts, Withdrawn

pytestmark = pytest.mark.integration

AGENT = str(Path(__file__).with_name("acp_agent.py"))


class Recorder:
    """A listener that keeps every state it is told, with the loop time it was told."""

    def __init__(self) -> None:
        self.states: list[tuple[str, str]] = []
        self.changes = 0
        self.exit: tuple[int | None, str] | None = None
        self.moved = asyncio.Event()

    def on_state(self, state: str, why: str, event: str) -> None:
        self.states.append((state, why))
        self.moved.set()

    def on_change(self) -> None:
        self.changes += 1

    def on_exit(self, code: int | None, reason: str) -> None:
        self.exit = (code, reason)
        self.states.append(("exited", reason))
        self.moved.set()

    @property
    def state(self) -> str | None:
        return self.states[-1][0] if self.states else None

    async def until(self, state: str, timeout: float = 10.0) -> str:
        """Wait for ``state``; returns its why."""

        async def wait() -> str:
            while True:
                if self.states and self.states[-1][0] == state:
                    return self.states[-1][1]
                self.moved.clear()
                await self.moved.wait()

        return await asyncio.wait_for(wait(), timeout)


QUICK = Timeouts(initialize=10, cancel=2)


@pytest.fixture
async def start(tmp_path):
    clients: list[AcpClient] = []

    async def go(*flags: str, timeouts: Timeouts = QUICK, ready: bool = True):
        rec = Recorder()
        client = AcpClient(
            [sys.executable, AGENT, *flags], cwd=str(tmp_path), env=None, listener=rec, timeouts=timeouts
        )
        clients.append(client)
        if ready:
            await rec.until("idle")
        return client, rec

    yield go
    for c in clients:
        await c.terminate(grace=1)
        c.close()


async def test_turn_permission_answer_and_idle(start, tmp_path):
    client, rec = await start()
    assert rec.states[-1] == ("idle", "session/new: ready, Scripted agent 1.0")
    client.prompt("perm")
    assert rec.state == "working"
    why = await rec.until("blocked")
    assert "touch marker.txt (execute)" in why and "Allow [allow]" in why and "Reject [reject]" in why
    perm = client.pending()
    assert perm is not None and perm.detail == "touch marker.txt"
    with pytest.raises(Busy):
        client.prompt("hello")  # blocked: only an answer goes in
    with pytest.raises(NotOffered):
        client.answer("maybe")
    client.answer("allow", request=perm.key)
    assert rec.state == "working"
    assert await rec.until("idle") == "stopReason end_turn"
    assert (tmp_path / "marker.txt").read_text() == "ran\n"
    tool = next(e for e in client.conversation.entries if e.kind == "tool")
    assert tool.status == "completed" and tool.text == "created marker.txt"
    with pytest.raises(Withdrawn):
        client.answer("allow", request=perm.key)  # already answered
    text = "\n".join(client.conversation.render(80))
    assert "> perm" in text and "✓ touch marker.txt [execute, completed]" in text and "Done." in text


async def test_a_second_prompt_and_busy_while_working(start):
    client, rec = await start()
    client.prompt("slow 0.3")
    with pytest.raises(Busy, match="turn is running"):
        client.prompt("hello")
    assert await rec.until("idle") == "stopReason end_turn"
    client.prompt("hello")
    await rec.until("idle")
    agent = [e.text for e in client.conversation.entries if e.kind == "agent"]
    assert agent[-1] == "Hello from the scripted agent."
    assert client.turns == 2


async def test_cancel_while_blocked_answers_cancelled_and_ends_idle(start, tmp_path):
    client, rec = await start()
    with pytest.raises(Busy, match="nothing to cancel"):
        client.cancel()
    client.prompt("perm")
    perm_why = await rec.until("blocked")
    assert perm_why
    key = client.pending().key
    client.cancel()
    assert rec.state == "working"
    assert await rec.until("idle") == "stopReason cancelled"
    with pytest.raises(Withdrawn):
        client.answer("allow", request=key)
    assert not (tmp_path / "marker.txt").exists()


async def test_cancel_of_a_turn_the_agent_never_ends(start):
    client, rec = await start("--ignore-cancel")
    client.prompt("slow")
    client.cancel()
    why = await rec.until("idle", timeout=6)
    assert why.startswith("session/cancel: turn ended by the client: the agent did not end the turn within 2 s")


async def test_permission_withdrawn_by_the_agent(start):
    client, rec = await start()
    client.prompt("withdraw 0.2")
    await rec.until("blocked")
    key = client.pending().key
    await rec.until("idle")
    with pytest.raises(Withdrawn):
        client.answer("allow", request=key)
    assert any("withdrawn by the agent" in e.text for e in client.conversation.entries)


async def test_plan_thoughts_and_unknown_update_kinds(start):
    client, rec = await start()
    client.prompt("plan")
    await rec.until("idle")
    assert client.conversation.plan[1] == {"content": "Write the fix", "status": "in_progress", "priority": "medium"}
    kinds = [e.kind for e in client.conversation.entries]
    assert "thought" in kinds
    text = "\n".join(client.conversation.render())
    assert "[x] Read the code" in text and "[>] Write the fix" in text


async def test_permission_with_no_options_is_refused_not_blocked(start):
    client, rec = await start()
    client.prompt("nooptions")
    await rec.until("idle")
    assert "blocked" not in [s for s, _ in rec.states]
    assert "no options to choose from" in client.error
    agent = [e.text for e in client.conversation.entries if e.kind == "agent"][-1]
    assert '"code": -32602' in agent


async def test_malformed_json_rpc_is_noted_and_the_turn_still_ends(start):
    client, rec = await start()
    client.prompt("malformed")
    assert await rec.until("idle") == "stopReason end_turn"
    assert client.faults["malformed"] >= 2 and client.faults["unmatched"] == 1
    notes = [e.text for e in client.conversation.entries if e.kind == "note"]
    assert any("a JSON list, not a JSON-RPC object" in n for n in notes)


async def test_unknown_and_unsupported_requests_get_method_not_found(start):
    client, rec = await start()
    client.prompt("unknown")
    await rec.until("idle")
    agent = [e.text for e in client.conversation.entries if e.kind == "agent"][-1]
    assert agent == "weird: -32601; terminal: -32601"
    notes = " ".join(e.text for e in client.conversation.entries if e.kind == "note")
    assert "refused terminal/create" in notes and "refused weird/method" in notes


async def test_stdout_logs_are_ignored_and_said_once(start):
    client, rec = await start("--stdout-logs")
    client.prompt("hello")
    assert await rec.until("idle") == "stopReason end_turn"
    assert client.faults["noise"] >= 2
    notes = [e.text for e in client.conversation.entries if e.kind == "note" and "not JSON-RPC" in e.text]
    assert len(notes) == 1 and "[scripted-agent]" in notes[0]


async def test_an_agent_that_never_answers_initialize_exits_with_the_reason(start):
    client, rec = await start("--silent-init", timeouts=Timeouts(initialize=0.5), ready=False)
    why = await rec.until("exited")
    assert why == "the agent did not answer initialize within 0.5 s"
    assert rec.states[0][0] == "working" if rec.states[:-1] else True
    with pytest.raises(Gone):
        client.prompt("hello")


async def test_another_protocol_version_is_refused(start):
    _, rec = await start("--protocol", "7", ready=False)
    assert await rec.until("exited") == "the agent speaks ACP version 7; this client speaks 1"


async def test_malformed_prompt_response_ends_the_turn_with_the_reason(start):
    client, rec = await start()
    client.prompt("badstop")
    why = await rec.until("idle")
    assert why.startswith("session/prompt: malformed answer: stopReason")
    client.prompt("hello")  # the session goes on
    assert await rec.until("idle") == "stopReason end_turn"


async def test_a_crash_mid_turn_exits_with_code_and_stderr(start):
    client, rec = await start()
    client.prompt("crash")
    why = await rec.until("exited")
    assert rec.exit[0] == 3
    assert why == "exit code 3; stderr: scripted-agent: fatal: the model exploded"
    with pytest.raises(Withdrawn):
        client.answer("allow")


async def test_a_crash_while_blocked_withdraws_the_permission(start):
    client, rec = await start()
    client.prompt("perm")
    await rec.until("blocked")
    key = client.pending().key
    client.child.signal(9)
    await rec.until("exited")
    with pytest.raises(Withdrawn):
        client.answer("allow", request=key)
    assert rec.exit[0] == -9


async def test_a_command_that_is_not_an_agent(start, tmp_path):
    rec_client, rec = await start("--help", ready=False)  # argparse prints help to stdout, exits 0
    why = await rec.until("exited")
    assert why.startswith("exit code 0") or "closed its stdout" in why
    assert rec_client.faults["noise"] >= 1


async def test_files_inside_the_folder_are_served(start, tmp_path):
    client, rec = await start()
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_text("alpha\nbeta\n")
    client.prompt(f"read {tmp_path}/sub/a.txt")
    await rec.until("idle")
    assert [e.text for e in client.conversation.entries if e.kind == "agent"][-1] == '{"content": "alpha\\nbeta\\n"}'
    client.prompt(f"write {tmp_path}/new/b.txt hello")
    await rec.until("idle")
    assert (tmp_path / "new" / "b.txt").read_text() == "hello"
    assert oct((tmp_path / "new" / "b.txt").stat().st_mode & 0o777) == "0o644"


@pytest.mark.parametrize("path", ["/etc/passwd", "{tmp}/../outside.txt", "{tmp}/link/passwd", "relative.txt"])
async def test_files_outside_the_folder_are_refused(start, tmp_path, path):
    client, rec = await start()
    (tmp_path / "link").symlink_to("/etc")
    path = path.format(tmp=tmp_path)
    client.prompt(f"read {path}")
    await rec.until("idle")
    answer = [e.text for e in client.conversation.entries if e.kind == "agent"][-1]
    assert '"code": -32602' in answer and ("outside the session's folder" in answer or "not absolute" in answer)
    client.prompt(f"write {path} pwned")
    await rec.until("idle")
    assert "-32602" in [e.text for e in client.conversation.entries if e.kind == "agent"][-1]
    assert not (tmp_path.parent / "outside.txt").exists()
    assert "pwned" not in Path("/etc/passwd").read_text()
    assert any("refused fs/write_text_file" in e.text for e in client.conversation.entries)


async def test_a_missing_file_is_resource_not_found(start, tmp_path):
    client, rec = await start()
    client.prompt(f"read {tmp_path}/nope.txt")
    await rec.until("idle")
    assert '"code": -32002' in [e.text for e in client.conversation.entries if e.kind == "agent"][-1]


async def test_a_flood_of_updates_is_kept_bounded(start):
    client, rec = await start()
    client.prompt("flood 3000")
    await rec.until("idle", timeout=20)
    agent = [e for e in client.conversation.entries if e.kind == "agent"]
    assert len(agent) == 1 and agent[0].text.startswith("chunk 0 chunk 1 ") and len(agent[0].text) <= 32 * 1024 + 1
