"""The capture tool: plans, the two witnesses (screen and mock log), the fixture writer, and
real captures of the CLI — including one it must refuse because its label is wrong."""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError

import panewatch_lab.capture as capture_module
from panewatch.fixtures import FixtureTruth, load_folder
from panewatch_lab.capture import (
    CaptureRefused,
    capture_one,
    check_mock,
    check_screen,
    mock_turn,
    run_step,
)
from panewatch_lab.capture_plan import (
    CapturePlan,
    CaptureSpec,
    MockTruth,
    Step,
    load_plan,
)
from panewatch_lab.claude_env import find_claude
from panewatch_lab.fixture_writer import write_folder

CLAUDE = find_claude()
needs_claude = pytest.mark.skipif(
    CLAUDE is None,
    reason="claude CLI not installed (npm install --prefix .lab-npm "
    "@anthropic-ai/claude-code@2.1.332, or set PANEWATCH_CLAUDE_BIN)",
)


def req(rid: int, step: str, kind: str = "main") -> dict:
    return {
        "event": "request",
        "id": rid,
        "path": "/v1/messages",
        "step": step,
        "mono": float(rid),
        "conversation": {"kind": kind},
    }


def reply(rid: int, step: str, status: str = "complete", stop: str = "end_turn", mono: float = 0.0) -> dict:
    return {"event": "reply", "id": rid, "step": step, "status": status, "stop_reason": stop, "mono": mono}


# -- the plan ------------------------------------------------------------------------------
@pytest.mark.unit
def test_bundled_plan_has_every_required_kind() -> None:
    plan = load_plan()
    names = {c.name for c in plan.capture}
    for name in (
        "blocked-bash",
        "blocked-edit",
        "blocked-plan",
        "blocked-question",
        "blocked-write",
        "idle-fresh",
        "idle-after-answer",
        "idle-auto",
        "idle-after-edit",
        "idle-after-question",
        "idle-prose",
        "idle-interrupted",
        "working-thinking",
        "working-tool",
        "working-typed",
    ):
        assert name in names
    for spec in plan.capture:  # every label has both witnesses
        assert spec.screen and spec.mock.turn


@pytest.mark.unit
@pytest.mark.parametrize(
    "step",
    [
        {"send": "x", "wait": "y"},
        {},
        {"key": "1"},
        {"wait": "("},
        {"pause": 60},
    ],
)
def test_bad_steps_are_refused(step: dict) -> None:
    with pytest.raises(ValidationError):
        Step.model_validate(step)


@pytest.mark.unit
def test_plan_refuses_a_kind_twice_and_bad_regexes() -> None:
    spec = {"kind": "x", "state": "idle", "note": "n", "screen": ["a"], "mock": {"turn": "none"}}
    with pytest.raises(ValidationError, match="named twice"):
        CapturePlan.model_validate({"agent": "claude", "ready": "r", "capture": [spec, spec]})
    with pytest.raises(ValidationError, match="bad regex"):
        CaptureSpec.model_validate({**spec, "not_screen": ["[unclosed"]})


# -- the mock's log ------------------------------------------------------------------------
@pytest.mark.unit
def test_mock_turn_reads_the_last_main_request() -> None:
    assert mock_turn([]) == ("none", None, None)
    records = [req(1, "think")]
    assert mock_turn(records)[:2] == ("waiting", "think")
    records.append({"event": "first_token", "id": 1})
    assert mock_turn(records)[:2] == ("streaming", "think")
    records.append(reply(1, "bash", stop="tool_use", mono=5.0))
    assert mock_turn(records) == ("tool", "think", 5.0)
    records += [req(2, "side-name", kind="side")]  # side requests say nothing about the turn
    assert mock_turn(records)[0] == "tool"
    records += [req(3, "bash-done"), reply(3, "bash-done", mono=6.0)]
    assert mock_turn(records) == ("done", "bash-done", 6.0)
    records += [req(4, "think"), reply(4, "think", status="cancelled", mono=7.0)]
    assert mock_turn(records)[:2] == ("cancelled", "think")


@pytest.mark.unit
def test_check_mock_reports_each_disagreement() -> None:
    records = [req(1, "sleep"), reply(1, "sleep", stop="tool_use", mono=100.0)]
    assert check_mock(MockTruth(turn="tool", step="sleep", within=4.0), records, now=102.0) == []
    assert check_mock(MockTruth(turn="tool", step="sleep", older=5.5), records, now=106.0) == []
    problems = check_mock(MockTruth(turn="done", step="hello", within=1.0), records, now=103.0)
    assert len(problems) == 3 and "'tool'" in problems[0] and "'sleep'" in problems[1] and "at most" in problems[2]
    assert "at least" in check_mock(MockTruth(turn="tool", older=5.5), records, now=101.0)[0]


@pytest.mark.unit
def test_check_screen_needs_every_regex_and_none_of_the_others() -> None:
    spec = CaptureSpec(
        kind="k",
        state="blocked",
        note="n",
        screen=[r"^\s*❯ 1\. Yes$", "proceed"],
        not_screen=["esc to interrupt"],
        mock=MockTruth(turn="tool"),
    )
    assert check_screen(spec, ["Do you want to proceed?", " ❯ 1. Yes"]) == []
    assert check_screen(spec, ["Do you want to proceed?", " ❯ 1. Yes please"]) == [r"screen lacks '^\\s*❯ 1\\. Yes$'"]
    assert check_screen(spec, ["proceed", " ❯ 1. Yes", "esc to interrupt"]) == ["screen shows 'esc to interrupt'"]


# -- the fixture folder --------------------------------------------------------------------
def truth(file: str, state: str = "idle", kind: str = "k") -> FixtureTruth:
    return FixtureTruth(file=file, state=state, rows=24, cols=80, kind=kind, note='with "quotes" · and ❯')


@pytest.mark.unit
def test_write_folder_round_trips_and_replaces_stale_files(tmp_path: Path) -> None:
    folder = tmp_path / "claude" / "9.9.9"
    folder.mkdir(parents=True)
    (folder / "old-hand-made.raw").write_bytes(b"x")
    write_folder(
        folder,
        "claude",
        "9.9.9",
        "cmd one",
        [(truth("b.raw"), b"bb"), (truth("a.raw", "blocked"), b"aa")],
        replace_all=True,
    )
    assert not (folder / "old-hand-made.raw").exists()
    loaded = load_folder(folder)
    assert [fx.truth.file for fx in loaded] == ["a.raw", "b.raw"]  # blocked first
    assert loaded[0].read() == b"aa" and loaded[1].truth.note == 'with "quotes" · and ❯'

    write_folder(folder, "claude", "9.9.9", "cmd two", [(truth("c.raw"), b"cc")], replace_all=False)
    data = tomllib.loads((folder / "truth.toml").read_text())
    assert [f["file"] for f in data["fixture"]] == ["a.raw", "b.raw", "c.raw"]
    assert data["how"] == "cmd one; then cmd two"


# -- real captures -------------------------------------------------------------------------
@pytest.mark.live
@needs_claude
def test_a_real_capture_is_cut_when_both_witnesses_agree() -> None:
    plan = load_plan()
    spec = next(c for c in plan.capture if c.name == "blocked-bash")
    assert CLAUDE is not None
    captured = capture_one(plan, spec, CLAUDE, 24, 80)
    assert captured.file == "blocked-bash-24x80.raw"
    assert b"Do\x1b[5Gyou" in captured.data or b"proceed?" in captured.data
    assert b"\x1b[?1049h" in captured.data, "from the CLI's start: the switch to the alternate screen is in it"


@pytest.mark.live
@needs_claude
def test_a_capture_whose_label_the_screen_contradicts_is_refused() -> None:
    """Label a permission dialog as idle: the screen and the mock's log both disagree, so no
    bytes come back, whatever the script meant to do."""
    plan = load_plan()
    bash = next(c for c in plan.capture if c.name == "blocked-bash")
    wrong = bash.model_copy(
        update={
            "kind": "mislabelled",
            "state": "idle",
            "screen": [r"\? for shortcuts"],
            "not_screen": ["Do you want to"],
            "mock": MockTruth(turn="done"),
        }
    )
    assert CLAUDE is not None
    with pytest.raises(CaptureRefused) as refused:
        capture_one(plan, wrong, CLAUDE, 24, 80, cut_timeout=1.0)
    reason = refused.value.reason
    assert "screen lacks" in reason and "screen shows 'Do you want to'" in reason
    assert "mock: the turn is 'tool'" in reason
    assert any("Do you want to" in line for line in refused.value.screen)


class _OpencodeFooter:
    """opencode 1.18.33's interrupt, as its bundle codes it: a first Esc arms it for 5 s (the
    footer reads "esc again to interrupt"), a second within those 5 s aborts the turn. This one
    draws at once (the fast case) and lets the 5 s pass whenever a wait would outlast them."""

    exit_status = None

    def __init__(self) -> None:
        self.armed = False
        self.aborted = False

    def text(self) -> str:
        footer = "" if self.aborted else ("esc again to interrupt" if self.armed else "esc interrupt")
        return f"  ⬝⬝⬝⬝  {footer}   ctrl+p commands"

    def send(self, data: str) -> None:
        if data == "\x1b" and not self.aborted:
            self.aborted, self.armed = self.armed, not self.armed

    def wait_for(self, pred: Callable[[str], bool], timeout: float) -> bool:
        if not pred(self.text()) and self.armed and timeout > 5.0:
            self.armed = False  # the arm expired while we waited
        return pred(self.text())

    @property
    def screen(self) -> Any:
        return SimpleNamespace(lines=lambda: [self.text()])


@pytest.mark.unit
def test_opencode_interrupt_steps_abort_even_when_the_first_esc_arms_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The canary of 2026-12-04 was refused at opencode's `interrupted`: the first Esc had armed
    the interrupt, the key step waited for the disarmed footer and its Esc only armed it again."""
    monkeypatch.setattr(capture_module.time, "sleep", lambda _s: None)
    spec = next(c for c in load_plan("opencode").capture if c.kind == "interrupted")
    session = _OpencodeFooter()
    for step in spec.steps:
        run_step(session, SimpleNamespace(records=list), step)  # type: ignore[arg-type]
    assert session.aborted
