"""The registry behind the engine on the pty host: sessions are recorded from engine events; after
a killed server, the next engine shows them again under their ids (lost, or exited with their
code) with their last screen, and checks reports against the kept token hash."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from engine_support import TESTER, fast, memory_rig
from panes_support import IDLE, PROMPT
from panewatch.access.validation import clean_report
from panewatch.engine import Engine, SessionSpec
from panewatch.engine._keeper import STATE_SAVE_S
from panewatch.errors import Conflict, InvalidRequest
from panewatch.hosts.base import LaunchSpec, PaneHandle, PaneSink
from panewatch.hosts.memory import MemoryHandle, MemoryHost
from panewatch.hosts.pty import PtyHost
from panewatch.manifest import ManifestStore, bundled_manifest_dir
from panewatch.registry import Registry, hash_token


def engine(registry: Registry) -> Engine:
    return Engine(ManifestStore.from_dirs(bundled_manifest_dir()), host=PtyHost(), options=fast(), registry=registry)


async def until(check, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.02)


@pytest.mark.integration
async def test_pty_sessions_come_back_lost_or_exited_with_their_screen(tmp_path: Path) -> None:
    registry = Registry.in_state_dir(tmp_path)
    first = engine(registry)
    await first.start()
    command = [sys.executable, "-c", "print('STILL-HERE'); input()"]
    live = await first.create(SessionSpec(command=command, name="live"), actor=TESTER)
    done = await first.create(SessionSpec(command=["sh", "-c", "echo GONE-NOW; exit 5"], name="done"), actor=TESTER)
    await until(lambda: "STILL-HERE" in "\n".join(first.screen_now(live.id).rows))
    await until(lambda: first.info(done.id).state == "exited")
    # (a program no manifest names reads "starting" under the generic manifest's start-up window)
    await asyncio.sleep(2.5)  # the screens are saved every 2 s
    token = first.report_token(live.id)
    record = registry.get(live.id)
    assert record.token_hash == hash_token(token) and record.host_kind == "pty" and record.host_ref
    # the server is killed: nothing more reaches the registry, the agents are left behind
    registry.close()

    reopened = Registry.in_state_dir(tmp_path)
    second = engine(reopened)
    await second.start()
    try:
        by_name = {s.name: s for s in await second.list()}
        assert by_name["live"].id == live.id and by_name["live"].state == "lost"
        assert "end with the server" in by_name["live"].why
        assert "STILL-HERE" in "\n".join((await second.screen(live.id)).rows)
        assert (by_name["done"].state, by_name["done"].exit_code) == ("exited", 5)
        assert "GONE-NOW" in "\n".join((await second.screen(done.id)).rows)
        assert second.report_token_matches(live.id, token)  # the kept hash checks the old token
        assert not second.report_token_matches(live.id, "wrong")
        await second.delete(done.id, actor=TESTER)
        assert reopened.get(done.id) is None
    finally:
        await second.stop()
        await first.stop()


@pytest.mark.unit
async def test_state_changes_reach_the_registry_together_within_state_save_s(tmp_path: Path) -> None:
    # a state change is not a write of its own on the engine's read path: it waits, at most
    # STATE_SAVE_S, for the others, and all go in one transaction; stopping writes what is left
    registry = Registry.in_state_dir(tmp_path)
    writes: list[int] = []
    update_many = registry.update_many
    registry.update_many = lambda rows: (writes.append(len(rows)), update_many(rows))[1]  # type: ignore[method-assign]
    async with memory_rig(registry=registry) as rig:
        a, agent_a = await rig.create()
        b, agent_b = await rig.create()
        await rig.settle(0.2)
        flushed = len(writes)
        agent_a.emit(PROMPT)
        agent_b.exit(3)
        await rig.settle(0.2)
        assert (await rig.engine.get(a)).state == "blocked" and (await rig.engine.get(b)).state == "exited"
        assert len(writes) == flushed  # not yet: both wait for the flush
        assert registry.get(b).state != "exited"
        await rig.settle(STATE_SAVE_S)
        assert writes[flushed:] == [2]  # both sessions, one transaction
        assert registry.get(a).state == "blocked"
        assert (registry.get(b).state, registry.get(b).exit_code) == ("exited", 3)
        assert "Do you want to proceed?" in registry.get(a).last_screen
        agent_a.emit(IDLE)
        await rig.settle(0.2)
    # the engine stopped before the flush was due: what was left was written on the way out
    reopened = Registry.in_state_dir(tmp_path)
    assert reopened.get(a).state == rig.engine.info(a).state != "blocked"


class AnyProgramHost(MemoryHost):
    """The memory host, whatever the argv: the test is the agent, and what matters is the launch."""

    async def spawn(self, spec: LaunchSpec, sink: PaneSink) -> PaneHandle:
        handle = MemoryHandle(spec, sink, self._loop)
        self.handles[spec.session] = handle
        return handle


def memory_engine(registry: Registry, host: MemoryHost) -> Engine:
    return Engine(ManifestStore.from_dirs(bundled_manifest_dir()), host=host, registry=registry)


async def lost_after_restart(
    tmp_path: Path, spec: SessionSpec, conversation: str
) -> tuple[Engine, AnyProgramHost, str]:
    """A session launched as ``spec`` that reported ``conversation``, then the server killed and a
    new one started on the same registry (the memory host keeps nothing: it is lost there)."""
    registry = Registry.in_state_dir(tmp_path)
    first = memory_engine(registry, AnyProgramHost())
    await first.start()
    sid = (await first.create(spec, actor=TESTER)).id
    first.report(sid, {"hook_event_name": "SessionStart", "session_id": conversation})
    second, host = await killed_and_restarted(first, tmp_path)
    assert second.info(sid).state == "lost"
    return second, host, sid


async def killed_and_restarted(engine: Engine, tmp_path: Path) -> tuple[Engine, AnyProgramHost]:
    """``engine`` killed as kill -9 would (nothing more reaches its registry: the one white-box
    step here), then a new engine on the same registry, with a new memory host (which keeps no
    pane: every session is lost there)."""
    keeper = engine._p.keeper
    assert keeper is not None
    keeper.close()
    await engine.stop()
    host = AnyProgramHost()
    restarted = memory_engine(Registry.in_state_dir(tmp_path), host)
    await restarted.start()
    return restarted, host


@pytest.mark.unit
async def test_a_new_name_is_kept_across_a_restart_and_a_blank_one_is_refused(tmp_path: Path) -> None:
    first = memory_engine(Registry.in_state_dir(tmp_path), AnyProgramHost())
    await first.start()
    try:
        sid = (await first.create(SessionSpec(command=["sh"], name="old-name"), actor=TESTER)).id
        seen: list[dict] = []
        first.subscribe(lambda event: seen.append(event.as_dict()) if event.type == "renamed" else None)
        renamed = await first.rename(sid, "  build\x1b[31m fix  ", actor=TESTER)
        assert renamed.name == "build[31m fix", "controls go, the ends are trimmed"
        assert seen == [{"type": "renamed", "session": renamed.model_dump(mode="json")}]
        with pytest.raises(InvalidRequest, match="visible character"):
            await first.rename(sid, " \x07 ", actor=TESTER)
        assert (await first.get(sid)).name == "build[31m fix"
    finally:
        await first.stop()
    second = memory_engine(Registry.in_state_dir(tmp_path), AnyProgramHost())
    await second.start()
    try:
        assert (await second.get(sid)).name == "build[31m fix"
    finally:
        await second.stop()


@pytest.mark.unit
async def test_a_lost_session_resumes_its_launch_its_wrapper_flags_and_env_after_a_restart(tmp_path: Path) -> None:
    launched = ["env", "LAB_MARK=1", "claude", "--permission-mode", "plan", "--disallowedTools", "Bash"]
    spec = SessionSpec(agent="claude", command=launched, env={"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"})
    engine, host, sid = await lost_after_restart(tmp_path, spec, "conv-77")
    try:
        record = Registry.in_state_dir(tmp_path).get(sid)
        # what the registry keeps for it: the launch before the hooks, and only the user's env
        assert record is not None and record.launched == launched
        assert record.env == {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
        assert record.command[: len(launched)] == launched and record.command[len(launched)] == "--settings"
        resume = engine.info(sid).resume
        assert resume is not None and (resume.possible, resume.why) == (True, None)

        info = await engine.resume(sid, actor=TESTER)
        argv = list(host.handles[sid].spec.argv)
        assert argv[: len(launched) + 2] == [*launched, "--resume", "conv-77"]
        assert argv[len(launched) + 2] == "--settings", "fresh hooks after the resume arguments"
        assert info.command == argv and info.state != "lost"
        env = host.handles[sid].spec.env
        assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9" and env["PANEWATCH_SESSION"] == sid
    finally:
        await engine.stop()


@pytest.mark.unit
async def test_a_session_lost_twice_resumes_its_launch_again_never_a_second_resume(tmp_path: Path) -> None:
    launched = ["claude", "--permission-mode", "plan"]
    engine, host, sid = await lost_after_restart(tmp_path, SessionSpec(agent="claude", command=launched), "conv-5")
    await engine.resume(sid, actor=TESTER)
    engine.report(sid, {"hook_event_name": "SessionStart", "session_id": "conv-6"})
    engine, host = await killed_and_restarted(engine, tmp_path)
    try:
        assert engine.info(sid).state == "lost"
        await engine.resume(sid, actor=TESTER)
        argv = list(host.handles[sid].spec.argv)
        assert argv[: len(launched) + 2] == [*launched, "--resume", "conv-6"], argv
        assert argv.count("--resume") == 1
    finally:
        await engine.stop()


@pytest.mark.unit
@pytest.mark.parametrize(
    ("command", "why"),
    [
        (["bash", "-c", "claude --permission-mode plan"], "runs 'bash', not the claude agent"),
        (["claude", "--brand-new", "x"], "does not know the option --brand-new"),
    ],
)
async def test_a_lost_card_says_what_the_409_says(tmp_path: Path, command: list[str], why: str) -> None:
    engine, host, sid = await lost_after_restart(tmp_path, SessionSpec(agent="claude", command=command), "conv-8")
    try:
        offer = engine.info(sid).resume
        assert offer is not None and offer.possible is False and offer.why is not None and why in offer.why
        with pytest.raises(Conflict) as refused:
            await engine.resume(sid, actor=TESTER)
        assert str(refused.value) == offer.why
        assert sid not in host.handles and engine.info(sid).state == "lost"  # nothing started
    finally:
        await engine.stop()


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hooks"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("agent", "version", "launched", "resume_args"),
    [
        ("opencode", "1.18.33", ["opencode", "--agent", "plan"], ["--session", "ses_dc0a7c4dbffebx1AZnxa8LoGiF"]),
        ("copilot", "1.0.102", ["copilot", "--mode", "plan"], ["--resume", "0690d88d-89c3-4785-b1b0-7001f020ba3f"]),
        ("cline", "3.0.65", ["cline", "--tui", "--auto-approve", "false"], ["--id", "1796357986183_qoncj"]),
    ],
)
async def test_the_recorded_hook_payloads_of_the_newer_agents_are_what_a_resume_reopens(
    tmp_path: Path, agent: str, version: str, launched: list[str], resume_args: list[str]
) -> None:
    # the real CLIs' payloads, as the report route takes them (clean_report), into the registry;
    # after a restart the session resumes on that conversation, its launch kept, hooks added again
    registry = Registry.in_state_dir(tmp_path)
    first = memory_engine(registry, AnyProgramHost())
    await first.start()
    sid = (await first.create(SessionSpec(agent=agent, command=launched), actor=TESTER)).id
    for path in sorted((FIXTURES / agent / version).glob("*.json")):
        first.report(sid, clean_report(json.loads(path.read_text())))
    engine, host = await killed_and_restarted(first, tmp_path)
    try:
        assert engine.info(sid).state == "lost"
        await engine.resume(sid, actor=TESTER)
        argv = list(host.handles[sid].spec.argv)
        assert argv[: len(launched) + 2] == [*launched, *resume_args], argv
    finally:
        await engine.stop()
