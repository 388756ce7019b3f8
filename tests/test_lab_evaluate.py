"""panewatch lab evaluate: the scoring on timelines whose answers are known, and one tiny live run."""

from __future__ import annotations

import pytest

from panewatch.manifest import ManifestStore, bundled_manifest_dir
from panewatch_lab import MANIFEST_DIR, eval_log, evaluate
from panewatch_lab.eval_analysis import analyze, claude_truth
from panewatch_lab.eval_detectors import ScreenWatch, ShadowDetectors, detector_infos
from panewatch_lab.eval_proc import CLK_TCK, group_by_truth, syscall_name
from panewatch_lab.eval_report import kept_notes, render
from panewatch_lab.eval_score import Segment, positive_runs, score, segments

# idle 0-10, working 10-20, blocked 20-25 (prompt drawn at 20, answered at 25), working 25-30, idle 30-40
TRUTH = segments([(0, "idle"), (10, "working"), (20, "blocked"), (25, "working"), (30, "idle")], 40)


# -- step functions ----------------------------------------------------------------------------
@pytest.mark.unit
def test_segments_merge_repeats_and_drop_empty_steps() -> None:
    got = segments([(0, "idle"), (1, "idle"), (2, "working"), (2, "blocked"), (3, "idle")], 5)
    assert got == [Segment(0, 2, "idle"), Segment(2, 3, "blocked"), Segment(3, 5, "idle")]


@pytest.mark.unit
def test_positive_runs_are_the_true_stretches() -> None:
    assert positive_runs([(0, False), (1, True), (2, True), (3, False), (4, True)], 6) == [(1, 3), (4, 6)]


# -- latency, misses, persistence ---------------------------------------------------------------
@pytest.mark.unit
def test_latency_and_persistence_of_a_caught_prompt() -> None:
    s = score(TRUTH, [(20.3, 25.4)])
    assert [p.latency for p in s.prompts] == [pytest.approx(0.3)]
    assert s.mean_persistence == pytest.approx(0.4)
    assert s.missed == 0 and s.alarms == []


@pytest.mark.unit
def test_a_detector_silent_during_the_prompt_missed_it() -> None:
    s = score(TRUTH, [(12, 13), (26, 27)])  # loud at the wrong times only
    assert s.missed == 1 and s.median_latency is None and s.mean_persistence is None
    assert s.false_alarms("working") == (2, pytest.approx(2.0))


@pytest.mark.unit
def test_median_and_max_over_several_prompts() -> None:
    truth = segments(
        [
            (0, "working"),
            (10, "blocked"),
            (12, "working"),
            (20, "blocked"),
            (22, "working"),
            (30, "blocked"),
            (32, "idle"),
        ],
        40,
    )
    s = score(truth, [(10.1, 12), (20.5, 22), (30.9, 32)])
    assert s.median_latency == pytest.approx(0.5) and s.max_latency == pytest.approx(0.9)
    assert s.mean_persistence == 0


@pytest.mark.unit
def test_persistence_runs_on_across_later_prompts_and_is_no_false_alarm() -> None:
    # the byte tail: the erased prompt stays in the last 8 KB until new output pushes it out
    truth = segments(
        [
            (0, "working"),
            (20, "blocked"),
            (25, "working"),
            (30, "idle"),
            (40, "working"),
            (45, "blocked"),
            (50, "working"),
        ],
        80,
    )
    s = score(truth, [(20.05, 70)])
    assert [p.latency for p in s.prompts] == [pytest.approx(0.05), 0.0]
    assert [p.persistence for p in s.prompts] == [pytest.approx(45), pytest.approx(20)]
    assert s.alarms == []


# -- false alarms -------------------------------------------------------------------------------
@pytest.mark.unit
def test_false_alarms_are_split_by_the_true_state_one_episode_per_segment() -> None:
    s = score(TRUTH, [(8, 12), (20, 25), (33, 36)])  # idle→working across t=10, then idle
    assert s.false_alarms("idle") == (2, pytest.approx(5.0))
    assert s.false_alarms("working") == (1, pytest.approx(2.0))
    assert s.missed == 0


@pytest.mark.unit
def test_a_quiet_timer_firing_exactly_at_the_answer_is_a_false_alarm_not_persistence() -> None:
    s = score(TRUTH, [(20.5, 25), (25, 26)])  # two runs that touch: only one crossed the answer
    assert s.mean_persistence == 0
    assert s.false_alarms("working") == (1, pytest.approx(1.0))


@pytest.mark.unit
def test_a_short_lead_before_the_prompt_is_negative_latency_not_a_false_alarm() -> None:
    s = score(TRUTH, [(19.9, 25)])  # e.g. the CLI's PermissionRequest hook, just before the dialog
    assert s.prompts[0].latency == pytest.approx(-0.1)
    assert s.alarms == [] and len(s.early) == 1


@pytest.mark.unit
def test_a_long_lead_is_a_false_alarm_and_the_prompt_counts_as_caught_at_once() -> None:
    s = score(TRUTH, [(18, 25)])
    assert s.prompts[0].latency == 0
    assert s.false_alarms("working") == (1, pytest.approx(2.0)) and s.early == []


@pytest.mark.unit
def test_no_prompts_at_all() -> None:
    truth = segments([(0, "idle"), (5, "working")], 10)
    s = score(truth, [(6, 7)])
    assert s.prompts == [] and s.median_latency is None and s.false_alarms("working")[0] == 1


# -- truth for the real CLI ---------------------------------------------------------------------
@pytest.mark.unit
def test_claude_truth_gates_the_dialog_on_the_tool_the_model_asked_for() -> None:
    records = [
        {"k": "watch", "t": 1.0, "v": ["idle"]},
        {"k": "bot", "t": 2.0, "action": "send"},
        {"k": "mock", "t": 2.1, "event": "request", "path": "/v1/messages", "step": "edit-read"},
        {
            "k": "mock",
            "t": 2.5,
            "event": "reply",
            "status": "complete",
            "stop_reason": "tool_use",
            "step": "edit-read",
            "tools": ["Read"],
        },
        {"k": "mock", "t": 2.6, "event": "request", "path": "/v1/messages", "step": "edit"},
        {
            "k": "mock",
            "t": 3.0,
            "event": "reply",
            "status": "complete",
            "stop_reason": "tool_use",
            "step": "edit",
            "tools": ["Edit"],
        },
        # an older reply's quoted "Do you want to proceed?" makes dialog:Bash match too
        {"k": "watch", "t": 3.1, "v": ["dialog:Bash", "dialog:Edit"]},
        {"k": "watch", "t": 7.0, "v": []},
        {"k": "mock", "t": 7.1, "event": "request", "path": "/v1/messages", "step": "edit-done"},
        {
            "k": "mock",
            "t": 7.4,
            "event": "reply",
            "status": "complete",
            "stop_reason": "end_turn",
            "step": "edit-done",
            "tools": [],
        },
        {
            "k": "mock",
            "t": 7.5,
            "event": "reply",
            "status": "complete",
            "stop_reason": "end_turn",
            "step": "side-title",
            "tools": [],
        },
    ]
    assert claude_truth(records) == [(1.0, "idle"), (2.0, "working"), (3.1, "blocked"), (7.0, "working"), (7.4, "idle")]


@pytest.mark.unit
def test_claude_truth_ignores_dialog_text_without_a_tool_use_reply() -> None:
    records = [
        {"k": "watch", "t": 1.0, "v": ["idle"]},
        {"k": "bot", "t": 2.0, "action": "send"},
        {"k": "watch", "t": 2.5, "v": ["dialog:Bash", "idle"]},  # prose that looks like a prompt
        {
            "k": "mock",
            "t": 2.4,
            "event": "reply",
            "status": "complete",
            "stop_reason": "end_turn",
            "step": "prose",
            "tools": [],
        },
    ]
    assert [s for _, s in claude_truth(records)] == ["idle", "working", "idle"]


# -- detectors, processes, report ---------------------------------------------------------------
def _manifest(agent: str = "fake"):
    m = ManifestStore.from_dirs(bundled_manifest_dir(), MANIFEST_DIR).get(agent)
    assert m is not None
    return m


@pytest.mark.unit
def test_shadow_detectors_read_a_drawn_prompt_and_the_quiet_timers() -> None:
    d = ShadowDetectors(_manifest(), 12, 80, sweep_s=0.7)
    d.read(0.0)
    dialog = "─" * 79 + "\r\n Do you want to proceed?\r\n ❯ 1. Yes\r\n   2. No\r\n\r\n Esc to cancel · Tab to amend"
    d.feed(0.1, dialog.encode())
    early = d.read(0.2)
    assert early["screen_50ms"] == "blocked" and early["screen_sweep"] == "idle" and early["question"] is True
    assert early["quiet_0.5"] is False
    later = d.read(0.7)
    assert later["screen_sweep"] == "blocked" and later["quiet_0.5"] is True and later["quiet_1"] is False


@pytest.mark.unit
def test_screen_watch_needs_every_text_of_a_name() -> None:
    w = ScreenWatch({"dialog": ("proceed?", "Esc to cancel")}, 10, 60, backend="pyte")
    assert w.feed(b"Do you want to proceed?\r\n") is None
    assert w.feed(b"Esc to cancel") == frozenset({"dialog"})
    assert w.feed(b"\x1b[2J") == frozenset()


@pytest.mark.unit
def test_process_samples_grouped_by_truth() -> None:
    samples = [
        {
            "k": "proc",
            "t": t,
            "state": "S",
            "cpu": int(t * 10),
            "threads": 1,
            "wchan": "wait_woken" if 20 <= t < 25 else "hrtimer_nanosleep",
            "syscall": "0" if 20 <= t < 25 else "230",
        }
        for t in (11.0, 11.5, 21.0, 21.5, 22.0)
    ]
    rows = {r.state: r for r in group_by_truth(samples, TRUTH)}
    assert rows["working"].samples == 2 and rows["blocked"].samples == 3
    assert rows["blocked"].wchans == {"wait_woken": 3}
    assert rows["working"].cpu_percent == pytest.approx(100 * 5 / CLK_TCK / 0.5)
    assert syscall_name("running") == "running"


def _records() -> list[dict]:
    out: list[dict] = [
        {
            "k": "meta",
            "t": 0.0,
            "agent": "fake",
            "session": "s1",
            "seed": 1,
            "sweep_ms": 700,
            "command": "panewatch lab evaluate --agent fake",
        }
    ]
    out += [
        {"k": "truth", "t": t, "v": v}
        for t, v in [(0, "idle"), (10, "working"), (20, "blocked"), (25, "working"), (30, "idle")]
    ]
    out += [
        {"k": "service", "t": 0.0, "session": "s1", "v": "idle", "source": "screen", "rule": None},
        {"k": "service", "t": 20.4, "session": "s1", "v": "blocked", "source": "screen", "rule": "permission_dialog"},
        {"k": "service", "t": 25.1, "session": "s1", "v": "working", "source": "screen", "rule": None},
        {"k": "service", "t": 26.0, "session": "other", "v": "blocked", "source": "screen", "rule": None},
    ]
    out += [
        {"k": "det", "t": 0.0, "d": info.key, "v": "idle" if info.kind == "state" else False}
        for info in detector_infos()
    ]
    out += [
        {"k": "det", "t": 20.05, "d": "screen_50ms", "v": "blocked"},
        {"k": "det", "t": 25.05, "d": "screen_50ms", "v": "working"},
        {"k": "det", "t": 12.0, "d": "quiet_0.5", "v": True},
        {"k": "det", "t": 14.0, "d": "quiet_0.5", "v": False},
    ]
    out.append({"k": "end", "t": 40.0})
    return out


@pytest.mark.unit
def test_analysis_of_a_synthetic_log_scores_the_service_of_its_own_session_only() -> None:
    a = analyze(_records())
    assert [p.seconds for p in a.prompts] == [5]
    service = a.row("service").score
    assert service.prompts[0].latency == pytest.approx(0.4) and service.alarms == []
    assert a.row("screen_50ms").score.prompts[0].latency == pytest.approx(0.05)
    assert a.row("tail").score.missed == 1
    assert a.row("quiet_0.5").score.false_alarms("working") == (1, pytest.approx(2.0))


@pytest.mark.unit
def test_report_has_every_detector_row_and_keeps_hand_written_notes() -> None:
    a = analyze(_records())
    notes = "<!-- notes:begin -->\nwhy the tail missed\n<!-- notes:end -->"
    md = render(a, "x.png", "x.jsonl.gz", previous=f"old\n{notes}\nold")
    for info in detector_infos():
        assert f"| {info.label} |" in md
    assert "| **Panewatch service (/ws/state)** | 0.40 s | 0.40 s | 0 / 1 |" in md
    assert "panewatch lab evaluate --agent fake" in md and "![" in md
    assert kept_notes(md) == notes


# -- the whole thing, live ----------------------------------------------------------------------
@pytest.mark.integration
def test_tiny_live_evaluation_end_to_end(tmp_path, capsys) -> None:
    """Fake agent at 20x speed, 2 tasks that each ask (seed 7), short bot delays: every table row.

    The service sweeps every 100 ms here and the bot answers 0.8-1 s after a prompt: an answer
    sooner than a sweep would make the service announce the prompt only while answering it."""
    argv = [
        "--agent",
        "fake",
        "--seed",
        "7",
        "--tasks",
        "2",
        "--speed",
        "20",
        "--prompt-prob",
        "1",
        "--question-prob",
        "0",
        "--answer-delay",
        "0.8,1",
        "--task-delay",
        "0.2,0.4",
        "--tail",
        "0.5",
        "--sweep-ms",
        "100",
        "--out",
        str(tmp_path),
        "--name",
        "tiny",
    ]
    assert evaluate.main(argv) == 0
    md = (tmp_path / "tiny.md").read_text()
    for info in detector_infos(sweep_s=0.1):
        assert f"| {info.label} |" in md, info.label
    assert "**Panewatch service (/ws/state)**" in md and "| True state |" in md
    records = eval_log.load(tmp_path / "tiny.jsonl.gz")
    a = analyze(records)
    assert len(a.prompts) == 2
    service = a.row("service").score
    # the bot answers through POST /answer, which re-reads the screen first: a service that never
    # saw the prompt would have refused the answer
    assert service.missed == 0 and service.alarms == []
    answers = [r for r in records if r["k"] == "bot" and r.get("action") == "answer"]
    assert [(r["status"], r["took"]) for r in answers] == [(200, True), (200, True)]
    assert {r["state"] for r in records if r["k"] == "proc"} <= set("RSDTtZXIW")
    # the saved log re-renders the same table
    again = tmp_path / "again"
    assert evaluate.main(["--analyze", str(tmp_path / "tiny.jsonl.gz"), "--out", str(again), "--no-png"]) == 0
    table = md.split("## The seed's table")[1].split("**Panewatch service** is")[0]
    assert table in (again / "tiny.md").read_text()
    # a dotted name (claude-2.1.332) keeps its dots
    (tmp_path / "tiny.jsonl.gz").rename(tmp_path / "claude-2.1.332.jsonl.gz")
    assert evaluate.main(["--analyze", str(tmp_path / "claude-2.1.332.jsonl.gz"), "--out", str(again), "--no-png"]) == 0
    assert (again / "claude-2.1.332.md").exists()


@pytest.mark.unit
def test_panewatch_lab_dispatches_evaluate(capsys) -> None:
    from panewatch_lab import cli

    assert cli.main(["evaluate", "--help"]) == 0
    assert "panewatch lab evaluate" in capsys.readouterr().out
    assert "evaluate" in cli.usage()
