"""Codex and Gemini hook integrations: real payloads read into reports, and what a launch adds.

The payloads in ``fixtures/hooks/<agent>/<version>/`` were sent by the real CLIs to a live
service (``tests/test_live_hooks.py`` with ``PANEWATCH_SAVE_HOOK_PAYLOADS``), in the order they
came: a plain turn, then an escalated command approved.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from panewatch.access.report_socket import REPORT_COMMAND
from panewatch.access.validation import clean_report
from panewatch.integrations import INTEGRATIONS, UnknownPayload, hooked, read_report
from panewatch.integrations.codex import CODEX_EVENTS, codex_overrides, event_label, trusted_hash
from panewatch.integrations.gemini import GEMINI_EVENTS, GeminiIntegration, overlay_home, with_hooks
from panewatch.procs.resume import agent_session_id
from panewatch.states import State

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hooks"

#: What each captured payload must read as, in order (None: not about the pane's state).
EXPECTED = {
    ("codex", "0.171.0"): [
        ("SessionStart", None),
        ("UserPromptSubmit", State.working),
        ("Stop", State.idle),
        ("UserPromptSubmit", State.working),
        ("PreToolUse", State.working),
        ("PermissionRequest", State.blocked),
        ("PostToolUse", State.working),
        ("Stop", State.idle),
    ],
    ("gemini", "0.61.0"): [
        ("SessionStart", None),
        ("BeforeAgent", State.working),
        ("AfterAgent", State.idle),
        ("BeforeAgent", State.working),
        ("BeforeTool", State.working),
        ("Notification:ToolPermission", State.blocked),
        ("AfterTool", State.working),
        ("AfterAgent", State.idle),
    ],
}


def _payloads(agent: str, version: str) -> list[dict[str, object]]:
    files = sorted((FIXTURES / agent / version).glob("*.json"))
    assert files, f"no captured payloads for {agent} {version}"
    return [json.loads(f.read_text()) for f in files]


@pytest.mark.parametrize(("agent", "version"), list(EXPECTED))
def test_captured_payloads_read_as_the_state_they_mean(agent: str, version: str) -> None:
    got: list[tuple[str, State | None]] = []
    for n, payload in enumerate(_payloads(agent, version)):
        report = INTEGRATIONS[agent].interpret(payload, float(n), {})
        if report is None:
            got.append((str(payload["hook_event_name"]), None))
            continue
        assert report.at == float(n)
        got.append((report.event, report.state))
    assert got == EXPECTED[(agent, version)]


@pytest.mark.parametrize(("agent", "version"), list(EXPECTED))
def test_every_captured_payload_names_the_conversation_a_resume_reopens(agent: str, version: str) -> None:
    ids = {agent_session_id(p) for p in _payloads(agent, version)}
    assert len(ids) == 1 and None not in ids


@pytest.mark.parametrize(("agent", "version"), list(EXPECTED))
def test_the_manifests_hooks_field_routes_payloads_to_the_integration(agent: str, version: str) -> None:
    """A pane whose foreground manifest says ``hooks = agent`` reads the payload with that agent's
    integration even when the session was launched as something else (a shell)."""
    payload = next(p for p in _payloads(agent, version) if p["hook_event_name"] not in ("SessionStart",))
    report = read_report(payload, 1.0, None, agent, {})
    assert report is not None and report.state == State.working


def test_subagent_and_unknown_events_are_ignored_and_junk_refused() -> None:
    codex, gemini = INTEGRATIONS["codex"], INTEGRATIONS["gemini"]
    assert codex.interpret({"hook_event_name": "PreToolUse", "agent_id": "a1"}, 0, {}) is None
    assert codex.interpret({"hook_event_name": "PreCompact"}, 0, {}) is None
    assert gemini.interpret({"hook_event_name": "BeforeModel"}, 0, {}) is None
    assert gemini.interpret({"hook_event_name": "Notification", "notification_type": "Other"}, 0, {}) is None
    for integration in (codex, gemini):
        with pytest.raises(UnknownPayload):
            integration.interpret({"what": "ever"}, 0, {})
        plain = integration.interpret({"state": "blocked", "detail": "asked"}, 2.0, {})
        assert plain is not None and (plain.state, plain.event, plain.detail) == (State.blocked, "report", "asked")


def test_codex_launch_adds_each_hook_and_trusts_exactly_those() -> None:
    args = codex_overrides()
    assert INTEGRATIONS["codex"].launch_args(["/opt/bin/codex", "--no-daemon"], ["codex"], {}) == args
    assert INTEGRATIONS["codex"].launch_args(["my-wrapper"], ["codex"], {}) == []
    values = [args[i + 1] for i in range(0, len(args), 2)]
    assert all(args[i] == "-c" for i in range(0, len(args), 2))
    assert [v.split("=", 1)[0] for v in values] == [*(f"hooks.{e}" for e in CODEX_EVENTS), "hooks.state"]
    assert all(json.dumps(REPORT_COMMAND) in v for v in values[:-1])
    for event in CODEX_EVENTS:
        assert f'"/<session-flags>/config.toml:{event_label(event)}:0:0"' in values[-1]
        assert trusted_hash(event) in values[-1]
    assert event_label("UserPromptSubmit") == "user_prompt_submit"


def test_a_launch_behind_known_wrappers_gets_its_hooks_at_the_end() -> None:
    # `sudo -u agent -- claude`: what is appended is still the agent's own argv, so its hooks
    # report (and its conversation id makes it resumable); a script or `bash -c` gets none
    wrapped = ["sudo", "-u", "agent", "--", "claude", "--permission-mode", "plan"]
    argv, _ = hooked(INTEGRATIONS["claude"], ["claude"], wrapped, {"PATH": os.environ.get("PATH", "")})
    assert argv[: len(wrapped)] == wrapped and argv[len(wrapped)] == "--settings"
    codex = ["env", "RUST_LOG=warn", "codex", "-s", "read-only"]
    assert INTEGRATIONS["codex"].launch_args(codex, ["codex"], {}) == codex_overrides()
    assert INTEGRATIONS["claude"].launch_args(["bash", "-c", "claude"], ["claude"], {}) == []
    # another user's Gemini reads its own home: no overlay of ours (it could not read it)
    assert GeminiIntegration().launch_env(["runuser", "-u", "agent", "--", "gemini"], ["gemini"], {}) == {}


def test_codex_trust_hash_is_codexs_own() -> None:
    """Reproduces the hash ``codex app-server``'s ``hooks/list`` gave for a ``-c`` Stop hook
    (0.171.0): sha256 over the sorted compact JSON of the normalized definition."""
    import hashlib

    identity = {
        "event_name": "stop",
        "hooks": [{"type": "command", "command": "cat >> /tmp/hx/cx/hooklog.jsonl", "timeout": 5, "async": False}],
    }
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    assert "sha256:" + hashlib.sha256(text.encode()).hexdigest() == (
        "sha256:ade5a0a9d95a8cfe040e9c7b1622a789bd695ea6ca1cad37c596db6a2b195637"
    )


def test_gemini_settings_keep_the_users_hooks_first() -> None:
    theirs = {"matcher": "*", "hooks": [{"type": "command", "command": "their-hook"}]}
    merged = with_hooks({"ui": {"theme": "x"}, "hooks": {"AfterAgent": [theirs]}})
    assert merged["ui"] == {"theme": "x"}
    assert merged["hooks"]["AfterAgent"][0] == theirs
    assert merged["hooks"]["AfterAgent"][1]["hooks"][0]["command"] == REPORT_COMMAND
    assert set(merged["hooks"]) == {*GEMINI_EVENTS, "Notification"}
    assert "SessionEnd" not in merged["hooks"] and "BeforeModel" not in merged["hooks"]


def test_gemini_overlay_links_the_users_files_and_never_writes_them(tmp_path: Path) -> None:
    real = tmp_path / "home" / ".gemini"
    real.mkdir(parents=True)
    (real / "settings.json").write_text('{"security": {"auth": {"selectedType": "gemini-api-key"}}}')
    (real / "oauth_creds.json").write_text("secret")
    (real / "history").mkdir()
    before = {p: p.read_bytes() for p in real.rglob("*") if p.is_file()}
    base = tmp_path / "base"
    base.mkdir(mode=0o700)
    home = overlay_home(real, base)
    assert home is not None
    folder = home / ".gemini"
    assert (folder / "oauth_creds.json").resolve() == (real / "oauth_creds.json").resolve()
    assert (folder / "history").is_symlink() and (folder / "trustedFolders.json").is_symlink()
    assert not (folder / "trustedFolders.json").exists()  # linked ahead: a first trust lands at home
    settings = json.loads((folder / "settings.json").read_text())
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert "AfterAgent" in settings["hooks"]
    assert overlay_home(real, base) == home  # the same settings: the same overlay, reused
    assert {p: p.read_bytes() for p in real.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in real.iterdir()) == ["history", "oauth_creds.json", "settings.json"]


def test_gemini_settings_that_are_not_json_launch_without_hooks(tmp_path: Path) -> None:
    real = tmp_path / ".gemini"
    real.mkdir()
    (real / "settings.json").write_text("{ // a comment Gemini allows\n}")
    assert overlay_home(real, tmp_path) is None


def test_gemini_launch_env_points_at_the_overlay_of_the_agents_own_home(tmp_path: Path) -> None:
    home = tmp_path / "agent-home"
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", "")}
    argv, added = hooked(INTEGRATIONS["gemini"], ["gemini"], ["/x/gemini"], env)
    assert argv == ["/x/gemini"] and added["HOME"] == str(home)
    overlay = Path(added["GEMINI_CLI_HOME"])
    assert (overlay / ".gemini" / "settings.json").exists()
    assert stat.S_IMODE(overlay.parent.stat().st_mode) == 0o700
    assert (home / ".gemini").is_dir() and not (home / ".gemini" / "settings.json").exists()
    assert GeminiIntegration().launch_env(["wrapper.sh"], ["gemini"], env) == {}


def _claude_install(root: Path, version: str) -> Path:
    package = root / "node_modules" / "@anthropic-ai" / "claude-code"
    (package / "bin").mkdir(parents=True)
    (package / "package.json").write_text(json.dumps({"name": "@anthropic-ai/claude-code", "version": version}))
    binary = package / "bin" / "claude.exe"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    (root / "bin").mkdir()
    (root / "bin" / "claude").symlink_to(binary)
    return root / "bin" / "claude"


@pytest.mark.parametrize(
    ("version", "curl", "kind"),
    [
        ("2.1.332", False, "http"),
        ("2.1.400", False, "http"),
        ("2.1.331", False, "command"),
        ("2.1.332", True, "command"),
    ],
)
def test_claude_hooks_are_native_http_only_without_curl_on_a_checked_version(
    tmp_path: Path, version: str, curl: bool, kind: str
) -> None:
    from panewatch.integrations.claude import installed_version

    claude = _claude_install(tmp_path, version)
    if curl:
        (tmp_path / "bin" / "curl").symlink_to("/bin/true")
    env = {
        "PATH": str(tmp_path / "bin"),
        "PANEWATCH_SESSION": "s1",
        "PANEWATCH_REPORT_URL": "http://127.0.0.1:9/report",
    }
    assert installed_version(str(claude)) == tuple(int(p) for p in version.split("."))
    args = INTEGRATIONS["claude"].launch_args(["claude"], ["claude"], env)
    hook = json.loads(args[1])["hooks"]["Stop"][0]["hooks"][0]
    assert args[0] == "--settings" and hook["type"] == kind
    if kind == "http":
        assert hook["url"] == "http://127.0.0.1:9/report?session=s1" and hook["onFailure"] == "continue"
    else:
        assert hook["command"] == REPORT_COMMAND
    # no loopback endpoint (or no session): curl's hooks, whatever the version
    bare = {"PATH": str(tmp_path / "bin")}
    assert (
        json.loads(INTEGRATIONS["claude"].launch_args(["claude"], ["claude"], bare)[1])["hooks"]["Stop"][0]["hooks"][0][
            "type"
        ]
        == "command"
    )


def test_geminis_tool_permission_names_the_command_or_file_its_confirmation_shows() -> None:
    """The ToolPermission notification's ``details`` are the confirmation's own (0.61.0:
    ``toSerializableDetails``): the command, or the file made relative to ``cwd`` as the box shows
    it; the approval policy acts only on such a request (and only when the screen agrees)."""
    base = {"hook_event_name": "Notification", "notification_type": "ToolPermission", "cwd": "/work/p"}

    def asked(details: dict[str, object]) -> tuple[object, ...]:
        payload = clean_report({**base, "message": "Tool requires confirmation", "details": details})
        report = INTEGRATIONS["gemini"].interpret(payload, 1.0, {})
        assert report is not None and report.state == State.blocked and report.request is not None
        r = report.request
        return (r.source, r.tool, r.subject_kind, r.subject)

    shell = {"type": "exec", "title": "Confirm Shell Command", "command": "touch notes.txt", "rootCommand": "touch"}
    assert asked(shell) == ("hook", "run_shell_command", "command", "touch notes.txt")
    write = {"type": "edit", "title": "Confirm Write: x.txt", "fileName": "x.txt", "filePath": "/work/p/src/x.txt"}
    assert asked(write) == ("hook", "write_file", "path", "src/x.txt")
    edit = {**write, "title": "Confirm Edit: x.txt", "filePath": "/elsewhere/x.txt"}
    assert asked(edit) == ("hook", "replace", "path", "/elsewhere/x.txt")  # outside cwd: kept whole
    assert asked({"type": "mcp", "title": "Confirm MCP", "serverName": "s"}) == ("hook", None, None, None)
    nested = clean_report({**base, "details": {"type": "exec", "command": "ls", "deep": {"x": "dropped"}}})
    assert nested["details"] == {"type": "exec", "command": "ls"}
