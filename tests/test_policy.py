"""The approval policy: its rules (subjects matched whole, tools per agent, folders, first match
wins), its file (refused with file, line and reason; the last good one stays; re-read on change),
and the engine acting on it on the memory host — only on a hook request the screen agrees with,
never on a dialog a pane drew by itself (a byte-perfect copy of Claude's Bash dialog)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from engine_support import TESTER, memory_rig
from live import memory_server
from panes_support import IDLE
from panewatch.access.validation import clean_report
from panewatch.engine import SessionSpec
from panewatch.engine.events import Acted, Event, PolicyDecided
from panewatch.manifest import ManifestStore, bundled_manifest_dir
from panewatch.policy import Asked, Policy, PolicyError, PolicyFile, PolicyStore, parse_policy
from panewatch.policy._shell_subject import parse_command

pytestmark = [pytest.mark.unit]

LS = r"^ls( -[a-zA-Z]+)*$"
FIXTURES = Path(__file__).parent.parent / "fixtures"
#: Claude Code 2.1.332's Bash dialog for `touch x.txt`, as the real CLI drew it (32x120).
CLAUDE_BASH = (FIXTURES / "claude/2.1.332/blocked-bash-32x120.raw").read_bytes()
TOUCH = r"^touch [a-z.]+$"


def policy(*rules: dict[str, object]) -> Policy:
    return Policy.build(PolicyFile.model_validate({"rules": list(rules)}))


def asked(
    subject: str | None,
    *,
    tool: str | None = "Bash",
    agent: str = "claude",
    folder: str = "/w",
    trusted: bool = True,
    kind: str = "command",
) -> Asked:
    return Asked(agent, tool, subject, kind if subject else None, folder, trusted)


# --- the matcher ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("subject", "action"),
    [
        ("ls -la", "allow"),
        ("ls", "allow"),
        ("ls; rm -rf build", "ask"),
        ("ls $(touch x)", "ask"),
        ("rm -rf build", "ask"),
        ("ls -la && rm -rf ~", "ask"),
        ("ls || rm x", "ask"),
        ("ls | sh", "ask"),
        ("ls `touch x`", "ask"),
        ("ls > listing", "ask"),
        ("ls -la\nrm -rf build", "ask"),
        ("FOO=1 ls", "ask"),
        ("ls -la &", "ask"),
    ],
)
def test_a_shell_subject_is_matched_whole_and_only_when_simple(subject: str, action: str) -> None:
    rules = policy({"tool": "Bash", "subject": LS, "action": "allow", "reason": "listing files is harmless"})
    assert rules.decide(asked(subject)).action == action


def test_what_is_not_simple_says_why_and_a_rule_may_opt_into_compound_commands() -> None:
    assert parse_command("ls -la").words == ("ls", "-la")
    assert parse_command("ls 'a b'").canonical == "ls 'a b'"
    for text, why in [
        ("ls; rm -rf build", "list"),
        ("ls $(touch x)", "commandsubstitution"),
        ("ls > f", "redirect"),
        ("rm *.py", "'*'"),
        ("ls $HOME", "parameter"),
        ("git log | head", "pipeline"),
    ]:
        refused = parse_command(text).refused
        assert refused is not None and why in refused, (text, refused)
    compound = policy({"subject": r"^git log \| head$", "action": "allow", "reason": "a read", "allow_compound": True})
    assert compound.decide(asked("git log | head")).action == "allow"
    assert compound.decide(asked("git log | head; rm x")).action == "ask"


def test_tools_are_matched_in_the_policys_names_each_manifest_maps_its_agents_to() -> None:
    manifests = ManifestStore.from_dirs(bundled_manifest_dir())
    rules = policy({"tool": "Bash", "subject": LS, "action": "allow", "reason": "listing"})
    codex, gemini = manifests.get("codex"), manifests.get("gemini")
    assert codex is not None and gemini is not None
    for agent, own in [("codex", codex.manifest.tools["exec"]), ("gemini", gemini.manifest.tools["run_shell_command"])]:
        assert rules.decide(asked("ls -la", agent=agent, tool=own)).action == "allow"
    assert rules.decide(asked("ls -la", tool="Edit")).action == "ask"  # another tool: no match
    assert codex.manifest.tools["apply_patch"] == "Edit"


def test_agent_folder_and_first_match_wins() -> None:
    rules = policy(
        {"id": "no-rm-home", "subject": r"^rm .*", "folder": "/home", "action": "deny", "reason": "not in home"},
        {
            "id": "rm-build",
            "agent": "claude",
            "subject": r"^rm -rf build$",
            "action": "allow",
            "reason": "a build folder",
        },
        {"id": "all-rm", "subject": r"^rm .*", "action": "suggest", "reason": "rm is worth a look"},
    )
    assert rules.decide(asked("rm -rf build", folder="/home/me/p")).rule == "no-rm-home"
    assert rules.decide(asked("rm -rf build", folder="/homework")).rule == "rm-build"  # not under /home
    assert rules.decide(asked("rm -rf build", agent="codex")).rule == "all-rm"
    assert rules.decide(asked("rm -rf build", agent="codex")).action == "suggest"
    assert rules.decide(asked("rm -rf src")).action == "suggest"
    none = rules.decide(asked("touch x"))
    assert (none.action, none.rule) == ("ask", None)


def test_a_rule_acts_on_screen_text_alone_only_when_it_says_so() -> None:
    plain = policy({"id": "ls", "tool": "Bash", "subject": LS, "action": "allow", "reason": "listing"})
    ruling = plain.decide(asked("ls -la", trusted=False))
    assert (ruling.action, ruling.rule) == ("ask", "ls") and "not the agent's own" in ruling.reason
    aider = policy({"tool": "Bash", "subject": LS, "action": "allow", "reason": "listing", "screen_only": True})
    assert aider.decide(asked("ls -la", trusted=False)).action == "allow"
    assert aider.described()[0]["screen_only"] is True


# --- the file -----------------------------------------------------------------------------------

GOOD = f"""
[[rules]]
id = "ls"
tool = "Bash"
subject = '{LS}'
action = "allow"
reason = "listing files is harmless"
"""


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        (GOOD + "\n[[rules]]\ntool = 'Bash'\naction = 'allow'\n", 9, "reason"),
        (GOOD + "\n[[rules]]\nsubject = '(a+)+\\1'\naction = 'deny'\nreason = 'x'\n", 10, "subject"),
        (GOOD + "\n[[rules]]\naction = 'maybe'\nreason = 'x'\n", 10, "action"),
        (GOOD + "\n[[rules]]\nactoin = 'allow'\nreason = 'x'\n", 10, "actoin"),
        (GOOD + "\n[[rules\n", 9, "TOML"),
        (GOOD + "\n[[rules]]\nfolder = 'relative'\naction = 'ask'\nreason = 'x'\n", 10, "absolute"),
    ],
)
def test_a_broken_file_is_refused_with_file_line_and_reason(tmp_path: Path, text: str, line: int, words: str) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(text)
    with pytest.raises(PolicyError) as refused:
        parse_policy(path)
    assert (refused.value.path, refused.value.line) == (path, line), refused.value
    assert words in refused.value.reason


def _touch(path: Path, text: str, tick: int) -> None:
    """Write ``text`` with an mtime of its own (the store re-reads a file whose mtime moved)."""
    path.write_text(text)
    os.utime(path, ns=(tick * 10**9, tick * 10**9))


def test_the_last_good_policy_stays_when_a_new_file_is_refused_and_a_fixed_one_loads(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    _touch(path, GOOD, 1)
    store = PolicyStore.from_file(path)
    assert store.error is None and [r["id"] for r in store.status()["rules"]] == ["ls"]
    _touch(path, GOOD.replace('reason = "listing files is harmless"', ""), 2)
    refused = store.reload_if_changed()
    assert refused is not None and "reason" in refused.reason
    status = store.status()
    assert status["error"]["line"] == 2 and status["error"]["file"] == str(path)
    assert store.decide(asked("ls -la")).action == "allow"  # the last good one is in force
    _touch(path, GOOD.replace('action = "allow"', 'action = "deny"'), 3)
    assert store.reload_if_changed() is None and store.status()["error"] is None
    assert store.decide(asked("ls -la")).action == "deny"


# --- the engine acting on it (memory host) --------------------------------------------------------

HOOK = {"hook_event_name": "PermissionRequest", "tool_name": "Bash", "tool_input": {"command": "touch x.txt"}}


def _policy_file(tmp_path: Path, *rules: str) -> PolicyStore:
    path = tmp_path / "policy.toml"
    path.write_text("\n".join(rules))
    store = PolicyStore.from_file(path)
    assert store.error is None, store.error
    return store


def rule(action: str, subject: str = TOUCH, **more: object) -> str:
    extra = "".join(f"{k} = {str(v).lower() if isinstance(v, bool) else repr(v)}\n" for k, v in more.items())
    return f"[[rules]]\nid = 'r-{action}'\ntool = 'Bash'\nsubject = '{subject}'\naction = '{action}'\nreason = 'because'\n{extra}"


async def _blocked_claude(rig, *, hook: dict[str, object] | None) -> tuple[str, object, list[Event]]:
    events: list[Event] = []
    rig.engine.subscribe(events.append)
    info = await rig.engine.create(SessionSpec(agent="claude", command=["agent"], rows=32, cols=120), actor=TESTER)
    agent = rig.host.handles[info.id]
    answers: list[bytes] = []

    def dialog(data: bytes) -> None:  # an option's number closes the dialog (the engine also
        if data.isdigit():  # answers the capture's terminal queries: not answers)
            answers.append(data)
            agent.emit(IDLE)

    agent.on_input = dialog
    agent.answers = answers
    agent.emit(CLAUDE_BASH)
    if hook is not None:
        rig.engine.report(info.id, clean_report(hook))
    await rig.settle()
    assert (await rig.engine.get(info.id)).state == "blocked"
    return info.id, agent, events


async def _decided(events: list[Event], sid: str) -> PolicyDecided:
    async with asyncio.timeout(10):
        while not any(isinstance(e, PolicyDecided) and e.session == sid for e in events):
            await asyncio.sleep(0)
    return next(e for e in events if isinstance(e, PolicyDecided) and e.session == sid)


async def _answered(events: list[Event], sid: str) -> Acted:
    async with asyncio.timeout(10):
        while not any(isinstance(e, Acted) and e.session == sid for e in events):
            await asyncio.sleep(0)
    return next(e for e in events if isinstance(e, Acted) and e.session == sid)


async def _quiet(rig) -> None:
    """Let every policy task run to its end (it is done once no task but this one is left)."""
    for _ in range(50):
        await rig.settle()


@pytest.mark.parametrize(("action", "keys"), [("allow", "1"), ("deny", "4")])
async def test_a_hook_request_the_screen_agrees_with_is_answered_by_the_rule(tmp_path, action, keys) -> None:
    async with memory_rig(policy=_policy_file(tmp_path, rule(action))) as rig:
        sid, agent, events = await _blocked_claude(rig, hook=HOOK)
        decided = await _decided(events, sid)
        assert (decided.action, decided.rule, decided.request.subject) == (action, f"r-{action}", "touch x.txt"), (
            decided.reason
        )
        acted = await _answered(events, sid)
        assert (acted.actor.kind, acted.actor.id, acted.actor.name, acted.keys) == (
            "policy",
            f"r-{action}",
            "because",
            keys,
        )
        assert agent.answers == [keys.encode()]
        assert rig.engine.policy.counts == {"allow": 0, "deny": 0, "ask": 0, "suggest": 0, action: 1}
        await _quiet(rig)
        assert (await rig.engine.get(sid)).state != "blocked"


#: Codex CLI 0.171.0's approval modal for `touch x.txt`, as the real CLI drew it (32x120).
CODEX_BASH = (FIXTURES / "codex/0.171.0/blocked-bash-32x120.raw").read_bytes()


@pytest.mark.parametrize("tool", ["Bash", "exec_command"])
async def test_codexs_approval_modal_is_answered_yes_proceed_once(tmp_path, tool) -> None:
    async with memory_rig(policy=_policy_file(tmp_path, rule("allow"))) as rig:
        events: list[Event] = []
        rig.engine.subscribe(events.append)
        info = await rig.engine.create(SessionSpec(agent="codex", command=["agent"], rows=32, cols=120), actor=TESTER)
        agent = rig.host.handles[info.id]
        answers: list[bytes] = []
        agent.on_input = lambda data: answers.append(data) if data.isdigit() else None
        agent.emit(CODEX_BASH)
        rig.engine.report(info.id, clean_report({**HOOK, "tool_name": tool}))  # Codex's payloads are Claude-shaped
        await rig.settle()
        decided = await _decided(events, info.id)
        assert (decided.action, decided.request.subject) == ("allow", "touch x.txt"), decided.reason
        await _answered(events, info.id)
        assert answers == [b"1"]  # "1. Yes, proceed (y)", not "2. Yes, and don't ask again"


#: Codex back at its composer after the approval (the real CLI, 32x120).
CODEX_IDLE = (FIXTURES / "codex/0.171.0/idle-after-answer-32x120.raw").read_bytes()


async def test_a_deny_on_codex_refuses_then_types_the_rules_reason_where_codex_asks_why(tmp_path) -> None:
    """Codex's refusal is "No, and tell Codex what to do differently": it waits at its composer
    for words, and the policy types its rule's reason there, through the guarded send."""
    async with memory_rig(policy=_policy_file(tmp_path, rule("deny"))) as rig:
        events: list[Event] = []
        rig.engine.subscribe(events.append)
        info = await rig.engine.create(SessionSpec(agent="codex", command=["agent"], rows=32, cols=120), actor=TESTER)
        agent = rig.host.handles[info.id]
        typed: list[bytes] = []

        def on_input(data: bytes) -> None:
            if data == b"3":  # "3. No, and tell Codex what to do differently (esc)"
                agent.emit(b"\x1b[2J\x1b[H" + CODEX_IDLE)
            typed.append(data)

        agent.on_input = on_input
        agent.emit(CODEX_BASH)
        rig.engine.report(info.id, clean_report(HOOK))
        for _ in range(200):
            await rig.settle()
            rig.clock.advance(0.05)
            if any(isinstance(e, Acted) and e.action == "send" for e in events):
                break
        sends = [e for e in events if isinstance(e, Acted) and e.action == "send"]
        keys = [d for d in typed if not d.startswith(b"\x1b")]  # not the engine's answers to the screen's queries
        assert keys[0] == b"3" and len(sends) == 1 and sends[0].actor.kind == "policy", keys
        assert b"Refused by policy rule r-deny: because" in b"".join(keys[1:]), keys


async def test_a_byte_perfect_copy_of_claudes_dialog_without_a_hook_is_not_answered(tmp_path) -> None:
    async with memory_rig(policy=_policy_file(tmp_path, rule("allow"))) as rig:
        sid, agent, events = await _blocked_claude(rig, hook=None)
        decided = await _decided(events, sid)
        assert (decided.action, decided.rule) == ("ask", "r-allow") and decided.request.source == "screen"
        assert "not the agent's own" in decided.reason
        assert decided.as_dict()["would"] == "allow"  # the page says what the rule would have done
        await _quiet(rig)
        assert agent.answers == [] and not any(isinstance(e, Acted) for e in events)
        assert (await rig.engine.get(sid)).state == "blocked"


async def test_a_hook_naming_another_command_than_the_screen_shows_is_not_answered(tmp_path) -> None:
    async with memory_rig(policy=_policy_file(tmp_path, rule("allow", r"^.*$"))) as rig:
        hook = {**HOOK, "tool_input": {"command": "ls -la"}}  # the screen shows touch x.txt
        sid, agent, events = await _blocked_claude(rig, hook=hook)
        decided = await _decided(events, sid)
        assert decided.action == "ask" and decided.request.disagrees
        await _quiet(rig)
        assert agent.answers == []


@pytest.mark.parametrize(
    ("rules", "action", "would"),
    [
        ((rule("allow", r"^rm .*$"),), "ask", None),
        ((rule("suggest"),), "suggest", None),
        ((rule("allow", dry_run=True),), "suggest", "allow"),
        ((rule("deny", dry_run=True),), "suggest", "deny"),
    ],
)
async def test_ask_and_suggest_answer_nothing_but_are_recorded(tmp_path, rules, action, would) -> None:
    async with memory_rig(policy=_policy_file(tmp_path, *rules)) as rig:
        sid, agent, events = await _blocked_claude(rig, hook=HOOK)
        decided = await _decided(events, sid)
        assert decided.action == action and decided.as_dict()["request"]["subject"] == "touch x.txt"
        assert decided.as_dict()["would"] == would
        await _quiet(rig)
        assert agent.answers == [] and (await rig.engine.get(sid)).state == "blocked"


async def test_paused_the_policy_answers_nothing(tmp_path) -> None:
    store = _policy_file(tmp_path, rule("allow"))
    store.set_paused(True, "a test")
    async with memory_rig(policy=store) as rig:
        sid, agent, events = await _blocked_claude(rig, hook=HOOK)
        decided = await _decided(events, sid)
        assert decided.action == "ask" and "paused" in decided.reason and decided.would == "allow"
        assert store.counts["allow"] == 0 and store.counts["ask"] == 1  # counted as carried out
        await _quiet(rig)
        assert agent.answers == []


async def test_a_screen_only_rule_answers_what_the_screen_alone_asks(tmp_path) -> None:
    async with memory_rig(policy=_policy_file(tmp_path, rule("allow", screen_only=True))) as rig:
        sid, agent, events = await _blocked_claude(rig, hook=None)
        assert (await _decided(events, sid)).action == "allow"
        assert (await _answered(events, sid)).actor.kind == "policy"
        assert agent.answers == [b"1"]


async def test_a_policy_answer_is_two_ledger_rows_naming_the_rule(tmp_path) -> None:
    """The merged tree end to end: the decision and the answer it made are both in the ledger
    (``GET /api/ledger``), the answer's actor the rule, the request the hook's."""
    path = tmp_path / "policy.toml"
    path.write_text(rule("allow"))
    async with memory_server(policy_file=path) as live:
        s = await live.create(agent="claude", command=["agent"], rows=32, cols=120)
        sid, agent = s["id"], live.host.handles[s["id"]]
        agent.on_input = lambda data: agent.emit(IDLE) if data.isdigit() else None
        agent.emit(CLAUDE_BASH)
        live.app.state.engine.report(sid, clean_report(HOOK))
        for _ in range(50):
            await live.settle()
            entries = (await live.http.get("/api/ledger", params={"session": sid})).json()["entries"]
            if any(e["action"] == "answer" for e in entries):
                break
        policy_row = next(e for e in entries if e["action"] == "policy")
        answer_row = next(e for e in entries if e["action"] == "answer")
        assert (policy_row["rule"], policy_row["detail"]) == ("r-allow", "allow")
        assert answer_row["actor"] == {"kind": "policy", "id": "r-allow", "name": "because"}
        assert (answer_row["took"], answer_row["request"]["subject"], answer_row["request"]["source"]) == (
            True,
            "touch x.txt",
            "hook",
        )
        assert (await live.http.get(f"/api/sessions/{sid}")).json()["state"] != "blocked"
