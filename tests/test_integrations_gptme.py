"""gptme's plugin: its real events read as the state they mean (a confirmation with its structured
request), and what a launch adds (a private folder on ``PYTHONPATH`` whose entry point names it).

The payloads in ``fixtures/hooks/gptme/0.35.1/`` were sent by the real gptme 0.35.1 on the lab's
mock, by the plugin this package writes (``_gptme_plugin.py``, found through its entry point on
``PYTHONPATH``), to a Unix socket that wrote each one down in order: ``task:bash`` (its
``touch x.txt`` confirmed with ``y``), then ``task:slow``, then ``/exit``.
"""

from __future__ import annotations

import enum
import importlib.util
import json
import os
import sys
import tempfile
import tty
import types
from importlib.metadata import distributions
from pathlib import Path
from typing import Any

import pytest

from panewatch.access.validation import clean_report
from panewatch.integrations import INTEGRATIONS, UnknownPayload, hooked
from panewatch.integrations.gptme import PLUGIN
from panewatch.manifest import ManifestStore, bundled_manifest_dir
from panewatch.procs.resume import ResumeSpec, agent_session_id, resume_argv
from panewatch.states import State

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hooks" / "gptme" / "0.35.1"


def _payloads() -> list[dict[str, object]]:
    """The payloads as the service takes them (``clean_report``: only ``tool_input`` stays nested)."""
    files = sorted(FIXTURES.glob("*.json"))
    assert files, "no captured gptme payloads"
    return [clean_report(json.loads(f.read_text())) for f in files]


def test_gptme_payloads_read_as_the_state_they_mean() -> None:
    gptme, memo = INTEGRATIONS["gptme"], {}
    got = []
    for n, payload in enumerate(_payloads()):
        report = gptme.interpret(payload, float(n), memo)
        got.append(None if report is None else (report.event, report.state))
    assert got == [
        None,  # session.start only names the conversation
        ("turn.pre", State.working),
        ("generation.pre", State.working),
        # gptme asks inside the tool's execution: tool.execute.pre comes before the question
        ("tool.execute.pre", State.working),
        ("tool.confirm", State.blocked),
        ("tool.execute.post", State.working),
        ("generation.pre", State.working),
        ("turn.post", State.idle),
        ("turn.pre", State.working),
        ("generation.pre", State.working),
        ("turn.post", State.idle),
        ("session.end", State.idle),
    ]


def test_every_payload_names_the_conversation() -> None:
    # the conversation's log folder name, the one `--name` gave it (the lab's "lab-session")
    assert {agent_session_id(p) for p in _payloads()} == {"lab-session"}


def test_a_confirmation_carries_its_command() -> None:
    confirm = next(p for p in _payloads() if p["gptme"] == "tool.confirm")
    report = INTEGRATIONS["gptme"].interpret(confirm, 0.0, {})
    assert report is not None and report.request is not None
    got = report.request
    assert (got.tool, got.subject, got.subject_kind, got.source) == ("shell", "touch x.txt", "command", "hook")


def test_a_payload_that_is_no_gptme_event_is_refused() -> None:
    gptme = INTEGRATIONS["gptme"]
    with pytest.raises(UnknownPayload):
        gptme.interpret({"session_id": "x"}, 0.0, {})
    with pytest.raises(UnknownPayload):
        gptme.interpret({"gptme": "tool.unknown"}, 0.0, {})
    plain = gptme.interpret({"state": "idle"}, 0.0, {})
    assert plain is not None and plain.state == State.idle


def test_the_gptme_manifest_names_its_hooks() -> None:
    manifest = ManifestStore.from_dirs(bundled_manifest_dir()).get("gptme")
    assert manifest is not None and manifest.manifest.hooks == "gptme"


def test_launch_puts_a_private_plugin_after_the_users_python_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr(tempfile, "tempdir", None)
    argv = ["env", "-u", "X", "gptme", "--name", "n"]
    got_argv, env = hooked(INTEGRATIONS["gptme"], ["gptme"], argv, {"HOME": "/h", "PYTHONPATH": "/mine"})
    assert got_argv == argv and env["HOME"] == "/h"
    mine, folder_text = env["PYTHONPATH"].split(os.pathsep)
    folder = Path(folder_text)
    assert mine == "/mine" and folder.parent.stat().st_mode & 0o077 == 0
    assert (folder / "panewatch_gptme.py").read_text() == PLUGIN.read_text()
    # gptme finds it as importlib.metadata does: a distribution with a gptme.plugins entry point
    found = [ep for d in distributions(path=[str(folder)]) for ep in d.entry_points if ep.group == "gptme.plugins"]
    assert [(ep.name, ep.value) for ep in found] == [("panewatch", "panewatch_gptme:plugin")]
    # no PYTHONPATH of the user's: the folder alone; a wrapper script gets nothing
    assert hooked(INTEGRATIONS["gptme"], ["gptme"], ["gptme"], {})[1]["PYTHONPATH"] == folder_text
    assert hooked(INTEGRATIONS["gptme"], ["gptme"], ["wrapper.sh"], {}) == (["wrapper.sh"], {})


def test_resume_names_the_conversation_in_place_of_the_launchs_own() -> None:
    found = ManifestStore.from_dirs(bundled_manifest_dir()).get("gptme")
    assert found is not None and isinstance(found.manifest.resume, ResumeSpec)
    launched = ["env", "-u", "X", "gptme", "-m", "lab/m", "-t=-browser", "--name", "old", "-r", "fix it", "a.py"]
    got = resume_argv(launched, found.manifest.resume, agent="gptme", processes=["gptme"], conversation="lab-session")
    # wrappers and flags kept, the first prompt and its file left out, --name/-r replaced
    assert got == ["env", "-u", "X", "gptme", "-m", "lab/m", "-t=-browser", "--name", "lab-session"]


class _Kind(enum.Enum):
    """gptme 0.35.1's hook types the plugin uses (``gptme/hooks/types.py``: the same values)."""

    SESSION_START = "session.start"
    SESSION_END = "session.end"
    TURN_PRE = "turn.pre"
    TURN_POST = "turn.post"
    GENERATION_PRE = "generation.pre"
    TOOL_EXECUTE_PRE = "tool.execute.pre"
    TOOL_EXECUTE_POST = "tool.execute.post"
    TOOL_CONFIRM = "tool.confirm"


class _Gptme:
    """A stand-in for the few gptme functions the plugin calls, to load the plugin file in-process."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, confirm_hooks: list[str]) -> None:
        self.registered: list[tuple[str, str, int]] = []
        self.auto = False
        self.read_only = False
        hooks = types.ModuleType("gptme.hooks")
        hooks.HookType = _Kind  # type: ignore[attr-defined]
        hooks.get_hooks = lambda kind: [types.SimpleNamespace(name=n, enabled=True) for n in confirm_hooks]  # type: ignore[attr-defined]
        hooks.register_hook = lambda name, kind, func, priority=0: self.registered.append((name, kind.value, priority))  # type: ignore[attr-defined]
        confirm = types.ModuleType("gptme.hooks.confirm")
        confirm.is_auto_confirm_active = lambda: self.auto  # type: ignore[attr-defined]
        tools = types.ModuleType("gptme.tools")
        tools.get_tool = lambda name: types.SimpleNamespace(read_only=self.read_only, is_mcp=False)  # type: ignore[attr-defined]
        plugin = types.ModuleType("gptme.plugins.plugin")
        plugin.GptmePlugin = types.SimpleNamespace  # type: ignore[attr-defined]
        for name, module in (("gptme", types.ModuleType("gptme")), ("gptme.hooks", hooks)):
            monkeypatch.setitem(sys.modules, name, module)
        monkeypatch.setitem(sys.modules, "gptme.hooks.confirm", confirm)
        monkeypatch.setitem(sys.modules, "gptme.tools", tools)
        monkeypatch.setitem(sys.modules, "gptme.plugins", types.ModuleType("gptme.plugins"))
        monkeypatch.setitem(sys.modules, "gptme.plugins.plugin", plugin)
        spec = importlib.util.spec_from_file_location("panewatch_gptme_under_test", PLUGIN)
        assert spec is not None and spec.loader is not None
        self.module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.module)
        self.posted: list[tuple[str, dict[str, object]]] = []
        # what would go to the report socket (``post`` keeps its order and counting)
        monkeypatch.setattr(self.module, "_send", lambda event, **fields: self.posted.append((event, fields)))


def _call(tool: str, args: list[str] | None = None, content: str | None = None) -> types.SimpleNamespace:
    return types.SimpleNamespace(tool=tool, args=args, content=content, kwargs=None)


def test_the_plugin_says_blocked_only_when_gptmes_terminal_prompt_will_ask(monkeypatch: pytest.MonkeyPatch) -> None:
    gptme = _Gptme(monkeypatch, ["guardrails", "panewatch.tool.confirm", "cli_confirm"])
    shell = _call("shell", content="touch x.txt")
    assert gptme.module.tool_confirm(shell, "preview", None) is None  # never answers
    assert gptme.posted == [("tool.confirm", {"tool": "shell", "tool_input": {"command": "touch x.txt"}})]
    gptme.module.tool_confirm(_call("save", ["notes.txt"], "text"), None, None)
    assert gptme.posted[-1] == ("tool.confirm", {"tool": "save", "tool_input": {"path": "notes.txt"}})
    gptme.auto = True  # the user answered "a" (auto-confirm): gptme asks no more
    gptme.module.tool_confirm(shell, None, None)
    gptme.auto, gptme.read_only = False, True  # a read-only tool is never asked about
    gptme.module.tool_confirm(_call("read", ["x.txt"]), None, None)
    assert len(gptme.posted) == 2
    # -y / --no-confirm (and the server): no cli_confirm hook, nothing asks
    quiet = _Gptme(monkeypatch, ["panewatch.tool.confirm"])
    quiet.module.tool_confirm(shell, None, None)
    assert quiet.posted == []


def test_the_plugin_registers_its_hooks_and_none_in_a_subagent(monkeypatch: pytest.MonkeyPatch) -> None:
    gptme = _Gptme(monkeypatch, [])
    made = gptme.module.plugin()
    assert made.name == "panewatch"
    made.register_hooks()
    kinds = {kind: priority for _, kind, priority in gptme.registered}
    assert set(kinds) == {k.value for k in _Kind}
    # after gptme's guardrails (200), anomaly watchdog (150) and server confirm (100), before its prompt (0)
    assert 0 < kinds["tool.confirm"] < 100
    assert kinds["generation.pre"] > 0 > kinds["turn.post"]
    monkeypatch.setenv("GPTME_SUBAGENT_AGENT_ID", "sub-1")
    child = _Gptme(monkeypatch, [])
    child.module.register()
    assert child.registered == []


def test_every_event_after_the_start_names_the_conversation(monkeypatch: pytest.MonkeyPatch) -> None:
    gptme = _Gptme(monkeypatch, ["cli_confirm"])
    gptme.module.session_start(logdir=Path("/logs/lab-session"))
    gptme.module.generation_pre([], model="lab/mock-coder")
    gptme.module.turn_post(types.SimpleNamespace(logdir=Path("/logs/lab-session")))
    assert gptme.posted[0] == ("session.start", {"session_id": "lab-session"})
    assert gptme.posted[2] == ("turn.post", {"session_id": "lab-session"})
    # generation.pre carries no logdir: post() adds the name remembered at the start (the
    # recorded generation.pre payloads of the real gptme carry it)
    assert gptme.posted[1] == ("generation.pre", {"model": "lab/mock-coder"})
    assert gptme.module._conversation == {"name": "lab-session"}


def test_the_plugin_sees_when_a_prompt_reads_the_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    module = _Gptme(monkeypatch, []).module
    primary, terminal = os.openpty()
    try:
        assert not module.reading_keys(terminal)  # a new terminal is canonical: lines, not keys
        tty.setraw(terminal)  # what prompt_toolkit does while gptme's prompt waits
        assert module.reading_keys(terminal)
    finally:
        os.close(primary)
        os.close(terminal)
    assert module.reading_keys(terminal)  # gone: nothing left to wait for


def _deferred(monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[str], int, int]:
    """The plugin, the events it sent, and a terminal in canonical mode: (module, sent, its fds)."""
    gptme = _Gptme(monkeypatch, [])
    sent: list[str] = []
    monkeypatch.setattr(gptme.module, "_send", lambda event, **fields: sent.append(event))
    primary, terminal = os.openpty()
    return gptme.module, sent, primary, terminal


def test_the_turns_end_is_told_once_gptmes_prompt_reads_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    # gptme writes its log and flushes typed-ahead keys after turn.post, then prompts: idle told
    # at the hook let a message be typed into that gap and thrown away
    module, sent, primary, terminal = _deferred(monkeypatch)
    polls: list[float] = []

    def poll(seconds: float) -> None:  # stands in for time.sleep: the prompt comes at the third look
        polls.append(seconds)
        assert sent == []  # nothing told while the terminal is still canonical
        if len(polls) == 3:
            tty.setraw(terminal)

    try:
        module._tell_when_prompting(terminal, module._said[0], {"session_id": "lab-session"}, sleep=poll)
    finally:
        os.close(primary)
        os.close(terminal)
    assert sent == ["turn.post"] and len(polls) == 3


def test_a_later_event_is_not_overtaken_by_the_deferred_turns_end(monkeypatch: pytest.MonkeyPatch) -> None:
    module, sent, primary, terminal = _deferred(monkeypatch)
    mine = module._said[0]

    def poll(seconds: float) -> None:  # the session ends before any prompt
        module.post("session.end")
        tty.setraw(terminal)

    try:
        module._tell_when_prompting(terminal, mine, {}, sleep=poll)
    finally:
        os.close(primary)
        os.close(terminal)
    assert sent == ["session.end"]  # the stale idle is not sent after it
