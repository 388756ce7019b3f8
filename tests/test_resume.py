"""Resume is the launched command with the manifest's resume arguments put in their place: the
wrappers, every flag and the environment come back; the first prompt does not; what cannot be
kept exactly is refused with the reason. One table per bundled agent (Aider has no resume)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from panewatch.manifest import ManifestStore, bundled_manifest_dir
from panewatch.procs.resume import ResumeError, agent_session_id, resume_argv

pytestmark = pytest.mark.unit

STORE = ManifestStore.from_dirs(bundled_manifest_dir())
ID = "5f0c-aa"


def resumed(agent: str, launched: Sequence[str] | None, conversation: str | None = ID) -> list[str]:
    m = STORE.get(agent).manifest  # type: ignore[union-attr]
    return resume_argv(
        launched, m.resume, agent=agent, processes=m.processes, conversation=conversation, command=m.command
    )


@pytest.mark.parametrize(
    ("launched", "expected"),
    [
        # the case: both restricting flags come back, --resume at the end
        (
            ["claude", "--permission-mode", "plan", "--disallowedTools", "Bash,Edit,Write"],
            ["claude", "--permission-mode", "plan", "--disallowedTools", "Bash,Edit,Write", "--resume", ID],
        ),
        (["claude", "--permission-mode", "default"], ["claude", "--permission-mode", "default", "--resume", ID]),
        # the first prompt is the conversation's already: not sent again
        (["claude", "--model", "opus", "fix the tests"], ["claude", "--model", "opus", "--resume", ID]),
        # a variadic takes every next word, as Commander reads it: all kept
        (
            ["claude", "--allowedTools", "Read", "Grep", "--verbose"],
            ["claude", "--allowedTools", "Read", "Grep", "--verbose", "--resume", ID],
        ),
        # options that pick a conversation themselves are replaced, never doubled
        (
            ["claude", "--resume", "old-1", "--permission-mode", "plan"],
            ["claude", "--permission-mode", "plan", "--resume", ID],
        ),
        (["claude", "-c", "--permission-mode=plan"], ["claude", "--permission-mode=plan", "--resume", ID]),
        (["claude", "-r", "--fork-session"], ["claude", "--resume", ID]),
        (["claude", "--session-id", "0b7f", "-d", "hooks"], ["claude", "-d", "hooks", "--resume", ID]),
        # wrappers stay in front: the user switch, the environment, the priority
        (
            ["sudo", "-u", "agent", "--", "claude", "--permission-mode", "plan"],
            ["sudo", "-u", "agent", "--", "claude", "--permission-mode", "plan", "--resume", ID],
        ),
        (
            ["env", "HTTPS_PROXY=http://p:3128", "nice", "-n", "5", "/opt/bin/claude", "--tools", "Read"],
            [
                "env",
                "HTTPS_PROXY=http://p:3128",
                "nice",
                "-n",
                "5",
                "/opt/bin/claude",
                "--tools",
                "Read",
                "--resume",
                ID,
            ],
        ),
    ],
)
def test_claude_resumes_its_launch(launched: list[str], expected: list[str]) -> None:
    assert resumed("claude", launched) == expected


@pytest.mark.parametrize(
    ("launched", "expected"),
    [
        # `codex resume` takes every top-level option after the subcommand: sandbox, approvals, -c, -m
        (
            ["codex", "--sandbox", "read-only", "-a", "on-request", "-m", "gpt-5", "-c", "model_reasoning_effort=high"],
            [
                "codex",
                "resume",
                ID,
                "--sandbox",
                "read-only",
                "-a",
                "on-request",
                "-m",
                "gpt-5",
                "-c",
                "model_reasoning_effort=high",
            ],
        ),
        (["codex", "--no-daemon"], ["codex", "resume", ID, "--no-daemon"]),
        (["codex", "-s", "workspace-write", "write the docs"], ["codex", "resume", ID, "-s", "workspace-write"]),
        # a launch that resumed already, or picked the last one: the recorded conversation instead
        (["codex", "resume", "old-2", "-s", "read-only"], ["codex", "resume", ID, "-s", "read-only"]),
        (["codex", "resume", "--last", "-a", "on-request"], ["codex", "resume", ID, "-a", "on-request"]),
        (
            ["codex", "-sread-only", "--ask-for-approval=never"],
            ["codex", "resume", ID, "-sread-only", "--ask-for-approval=never"],
        ),
        (
            ["setpriv", "--reuid", "1000", "--regid", "1000", "--clear-groups", "--", "codex", "-s", "read-only"],
            [
                "setpriv",
                "--reuid",
                "1000",
                "--regid",
                "1000",
                "--clear-groups",
                "--",
                "codex",
                "resume",
                ID,
                "-s",
                "read-only",
            ],
        ),
    ],
)
def test_codex_resumes_its_launch_with_its_sandbox(launched: list[str], expected: list[str]) -> None:
    assert resumed("codex", launched) == expected


@pytest.mark.parametrize(
    ("launched", "expected"),
    [
        (
            ["gemini", "--approval-mode", "plan", "--sandbox"],
            ["gemini", "--approval-mode", "plan", "--sandbox", "--resume", ID],
        ),
        (["gemini"], ["gemini", "--resume", ID]),
        # the first prompt, as an operand or as -i: not again
        (["gemini", "-m", "gemini-2.5-pro", "explain this repo"], ["gemini", "-m", "gemini-2.5-pro", "--resume", ID]),
        (["gemini", "-i", "explain this repo", "--yolo"], ["gemini", "--yolo", "--resume", ID]),
        (
            ["gemini", "--policy", "a.toml", "b.toml", "-r", "latest"],
            ["gemini", "--policy", "a.toml", "b.toml", "--resume", ID],
        ),
        (
            ["runuser", "-u", "agent", "--", "gemini", "--approval-mode=plan"],
            ["runuser", "-u", "agent", "--", "gemini", "--approval-mode=plan", "--resume", ID],
        ),
    ],
)
def test_gemini_resumes_its_launch(launched: list[str], expected: list[str]) -> None:
    assert resumed("gemini", launched) == expected


@pytest.mark.parametrize(
    ("launched", "expected"),
    [
        (["qwen", "--approval-mode", "default"], ["qwen", "--approval-mode", "default", "--resume", ID]),
        # the first prompt (-i), and a session picked by the launch (-c), not again
        (["qwen", "-i", "fix the tests", "--yolo"], ["qwen", "--yolo", "--resume", ID]),
        (["qwen", "-c", "--exclude-tools", "a", "b"], ["qwen", "--exclude-tools", "a", "b", "--resume", ID]),
    ],
)
def test_qwen_resumes_its_launch(launched: list[str], expected: list[str]) -> None:
    assert resumed("qwen", launched) == expected


@pytest.mark.parametrize(
    ("launched", "expected"),
    [
        (["opencode"], ["opencode", "--session", ID]),
        (
            ["opencode", "--agent", "plan", "-m", "mock/x"],
            ["opencode", "--agent", "plan", "-m", "mock/x", "--session", ID],
        ),
        # its bare word is the project folder, not a prompt: kept (the session is filed under it)
        (["opencode", "../proj", "--pure"], ["opencode", "../proj", "--pure", "--session", ID]),
        (["opencode", "--", "-odd-dir"], ["opencode", "--", "-odd-dir", "--session", ID]),
        # the first prompt, and options that pick or fork a session themselves: not again
        (["opencode", "--prompt", "fix the tests", "--auto"], ["opencode", "--auto", "--session", ID]),
        (["opencode", "-c", "--fork", "--cors", "a", "b"], ["opencode", "--cors", "a", "b", "--session", ID]),
        (["opencode", "-s", "ses_old", "--log-level", "DEBUG"], ["opencode", "--log-level", "DEBUG", "--session", ID]),
        (
            ["env", "OPENCODE_DISABLE_AUTOUPDATE=1", "opencode", "--port=4096"],
            ["env", "OPENCODE_DISABLE_AUTOUPDATE=1", "opencode", "--port=4096", "--session", ID],
        ),
    ],
)
def test_opencode_resumes_its_launch_in_its_project(launched: list[str], expected: list[str]) -> None:
    assert resumed("opencode", launched) == expected


@pytest.mark.parametrize(
    ("launched", "expected"),
    [
        (["copilot"], ["copilot", "--resume", ID]),
        (
            ["copilot", "--mode", "plan", "--deny-tool", "shell(rm)", "write", "-C", "sub"],
            ["copilot", "--mode", "plan", "--deny-tool", "shell(rm)", "write", "-C", "sub", "--resume", ID],
        ),
        # the first prompt (and what is attached to it): not again; a session picked or named: replaced
        (["copilot", "-i", "fix the tests", "--allow-all-tools"], ["copilot", "--allow-all-tools", "--resume", ID]),
        (["copilot", "-p", "go", "--attachment", "a.png", "-s"], ["copilot", "-s", "--resume", ID]),
        (["copilot", "--resume", "--model", "gpt-x"], ["copilot", "--model", "gpt-x", "--resume", ID]),
        (["copilot", "-r", "0cb916d", "--continue", "-n", "mine"], ["copilot", "--resume", ID]),
        (["copilot", "--session-id=0cb9", "--yolo"], ["copilot", "--yolo", "--resume", ID]),
    ],
)
def test_copilot_resumes_its_launch(launched: list[str], expected: list[str]) -> None:
    assert resumed("copilot", launched) == expected


@pytest.mark.parametrize(
    ("launched", "expected"),
    [
        (["cline", "--tui", "--auto-approve", "false"], ["cline", "--tui", "--auto-approve", "false", "--id", ID]),
        # the first prompt is the session's already: not again; a session picked by the launch: replaced
        (["cline", "-i", "-p", "fix the tests"], ["cline", "-i", "-p", "--id", ID]),
        (
            ["cline", "--id", "1796_old", "-m", "x", "--retries", "3"],
            ["cline", "-m", "x", "--retries", "3", "--id", ID],
        ),
        (["cline", "--retries", "--json"], ["cline", "--retries", "--json", "--id", ID]),
    ],
)
def test_cline_resumes_its_launch(launched: list[str], expected: list[str]) -> None:
    assert resumed("cline", launched) == expected


def test_a_cline_launched_in_a_new_worktree_is_refused_not_resumed_elsewhere() -> None:
    with pytest.raises(ResumeError, match="--worktree sets up something new at every start"):
        resumed("cline", ["cline", "--tui", "--worktree"])


def test_aider_and_the_shell_have_no_resume() -> None:
    # Aider keeps no conversation an id can reopen (its chat history file is replayed by a new run)
    for agent in ("aider", "shell"):
        assert STORE.get(agent).manifest.resume == []  # type: ignore[union-attr]
        with pytest.raises(ResumeError, match=f"the {agent} agent has no resume command"):
            resumed(agent, [agent])


@pytest.mark.parametrize(
    ("launched", "why"),
    [
        # the command is not the agent's own: nowhere to put --resume
        (["bash", "-c", "claude --permission-mode plan"], r"runs 'bash', not the claude agent .*bash -c"),
        (["/home/me/bin/my-claude.sh", "--resume"], r"runs 'my-claude.sh', not the claude agent"),
        # a wrapper whose command is one shell string: no argv to find
        (["runuser", "agent", "-c", "claude --permission-mode plan"], "cannot find the agent's own command"),
        # an option the manifest does not know, followed by a word: its value, or the prompt?
        (["claude", "--brand-new", "plan", "--permission-mode", "plan"], "does not know the option --brand-new"),
        (["claude", "--permission-mode"], "ends with --permission-mode, which needs a value"),
        # recorded before the launch was kept: refused, not resumed without its flags
        (None, "older Panewatch, which did not keep how it was launched"),
    ],
)
def test_what_cannot_be_kept_exactly_is_refused_with_the_reason(launched: list[str] | None, why: str) -> None:
    with pytest.raises(ResumeError, match=why):
        resumed("claude", launched)


def test_an_unknown_option_with_its_value_attached_or_alone_is_kept() -> None:
    assert resumed("claude", ["claude", "--brand-new=x", "--later"]) == [
        "claude",
        "--brand-new=x",
        "--later",
        "--resume",
        ID,
    ]


def test_without_a_conversation_id_there_is_nothing_to_resume() -> None:
    with pytest.raises(ResumeError, match="never reported its conversation id"):
        resumed("claude", ["claude"], conversation=None)
    with pytest.raises(ResumeError, match="not one an agent would give"):
        resumed("claude", ["claude"], conversation="--dangerously-skip-permissions")


def test_the_older_list_form_resumes_only_a_launch_it_cannot_drop_anything_of() -> None:
    template = ["claude", "--permission-mode", "default", "--resume", "{agent_session_id}"]

    def old(launched: list[str]) -> list[str]:
        return resume_argv(
            launched,
            template,
            agent="claude",
            processes=["claude"],
            conversation=ID,
            command=["claude", "--permission-mode", "default"],
        )

    assert old(["sudo", "-u", "agent", "claude", "--permission-mode", "default"]) == [
        "sudo", "-u", "agent", "claude", "--permission-mode", "default", "--resume", ID,
    ]  # fmt: skip
    assert old(["claude"])[-2:] == ["--resume", ID]
    with pytest.raises(
        ResumeError, match=r"older list form.*--permission-mode plan.*give the manifest a \[resume\] table"
    ):
        old(["claude", "--permission-mode", "plan"])


def test_conversation_id_from_a_hook_payload() -> None:
    assert agent_session_id({"hook_event_name": "Stop", "session_id": "0b7f3c1e-1111"}) == "0b7f3c1e-1111"
    assert agent_session_id({"session_id": "--dangerously-skip-permissions"}) is None  # never an option
    assert agent_session_id({"state": "idle"}) is None
    assert agent_session_id({"opencode": "session.idle", "sessionID": "ses_dc0a7c"}) == "ses_dc0a7c"
    assert agent_session_id({"copilot_event": "agentStop", "sessionId": "0690d88d-89c3"}) == "0690d88d-89c3"
    cline = {"hookName": "agent_end", "taskId": "conv_1", "sessionContext": {"rootSessionId": "1796_qoncj"}}
    assert agent_session_id(cline) == "1796_qoncj"
    assert agent_session_id({"sessionContext": "1796_qoncj"}) is None


@pytest.mark.parametrize(
    ("table", "why"),
    [
        ('args = ["--continue"]', "must contain {agent_session_id}"),
        ('args = ["resume", "{agent_session_id}"]', 'placed at "end" must start with an option'),
        ('args = ["-r", "{agent_session_id}"]\nflags = ["-x"]\nvariadic = ["-x"]', "-x is in both variadic and flags"),
        ('args = ["-r", "{agent_session_id}"]\nreplaces = ["-r"]', "-r must also be listed by how they read"),
    ],
)
def test_a_resume_table_that_cannot_work_is_refused_at_load(tmp_path: Path, table: str, why: str) -> None:
    (tmp_path / "bad.toml").write_text(
        f'agent = "bad"\nversion = "1"\nprocesses = ["bad"]\n[resume]\n{table}\n'
        '[[rules]]\nname = "x"\nstate = "idle"\nwhy = "x"\nany = ["x"]\n'
    )
    store = ManifestStore.from_dirs(tmp_path)
    assert store.get("bad") is None
    assert any(why in str(e) for e in store.errors.values()), store.errors


def test_a_list_without_the_id_is_refused_at_load(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text(
        'agent = "bad"\nversion = "1"\nresume = ["bad", "--continue"]\n'
        '[[rules]]\nname = "x"\nstate = "idle"\nwhy = "x"\nany = ["x"]\n'
    )
    store = ManifestStore.from_dirs(tmp_path)
    assert store.get("bad") is None
    assert any("resume must contain {agent_session_id}" in str(e) for e in store.errors.values())
