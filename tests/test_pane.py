"""A pane without a host or a process: bytes in, signals in, a decision out, on a hand clock."""

from __future__ import annotations

import pytest

from panes_support import IDLE, PROMPT, WORKING
from panewatch.clock import ManualClock
from panewatch.manifest import ManifestStore, bundled_manifest_dir
from panewatch.panes.pane import Pane
from panewatch.panes.signals import Report
from panewatch.procs.procinfo import Program
from panewatch.screen import Screen
from panewatch.states import Source, State

pytestmark = pytest.mark.unit

STORE = ManifestStore.from_dirs(bundled_manifest_dir())


def claude_pane(clock: ManualClock) -> Pane:
    return Pane(Screen(12, 60), agent="claude", clock=clock.time, wall=lambda: clock.time() + 5000.0, own_pid=42)


def read(pane: Pane) -> None:
    pane.feed_all()
    pane.set_decision(pane.classify(STORE, 60.0))


def test_bytes_become_a_decision_and_since_moves_only_with_the_state():
    clock = ManualClock()
    pane = claude_pane(clock)
    assert (pane.decision.state, pane.decision.source) == (State.working, Source.start)
    pane.receive(WORKING)
    assert pane.pending and pane.bytes_read == len(WORKING) and pane.bytes_fed == 0
    read(pane)
    assert (pane.decision.state, pane.decision.rule) == (State.working, "interrupt_footer")
    since = pane.decision.since
    clock.advance(3)
    pane.receive(b"more work\r\n" + WORKING)
    read(pane)
    assert pane.decision.since == since  # still working: the same stretch
    pane.receive(PROMPT)
    read(pane)
    assert (pane.decision.state, pane.decision.source, pane.decision.rule) == (
        State.blocked,
        Source.screen,
        "permission_dialog",
    )
    assert pane.decision.since == clock.time() + 5000.0


def test_a_report_counts_inside_its_freshness_window_only():
    clock = ManualClock()
    pane = claude_pane(clock)
    pane.receive(IDLE)
    read(pane)
    pane.set_report(Report(State.working, "PreToolUse", clock.time()))
    assert pane.needs_classify(STORE, 60.0)
    decision = pane.classify(STORE, 60.0)
    pane.set_decision(decision)
    assert (decision.state, decision.source, decision.event, decision.rule) == (
        State.working,
        Source.hook,
        "PreToolUse",
        None,
    )
    assert not pane.needs_classify(STORE, 60.0)
    clock.advance(61)
    assert pane.needs_classify(STORE, 60.0)  # gone stale without any output
    assert pane.classify(STORE, 60.0).source == Source.screen


def test_the_shell_back_in_the_foreground_decides_after_an_agent_ran():
    clock = ManualClock()
    pane = Pane(Screen(12, 60), agent="shell", clock=clock.time, wall=clock.time, own_pid=42)
    programs = {42: Program(42, "bash", "bash"), 77: Program(77, "claude", "claude")}
    assert pane.sample_foreground(77, programs.get)
    pane.receive(PROMPT)
    read(pane)
    assert (pane.decision.state, pane.manifest_agent) == (State.blocked, "claude")
    pane.receive(b"\x1b[2J\x1b[H" + WORKING)  # the agent's last words, still on screen
    assert pane.sample_foreground(42, programs.get)
    read(pane)
    assert (pane.decision.state, pane.decision.source, pane.decision.program) == (State.idle, Source.process, "bash")
    assert not pane.sample_foreground(42, programs.get)  # same group, read moments ago
    clock.advance(2.5)
    assert not pane.sample_foreground(42, programs.get)  # re-read: the same program


def test_a_shell_waiting_for_its_foreground_program_is_working_until_it_is_back():
    clock = ManualClock()
    pane = Pane(Screen(12, 60), agent="shell", clock=clock.time, wall=clock.time, own_pid=42)
    programs = {42: Program(42, "bash", "bash"), 77: Program(77, "sleep", "sleep"), 78: Program(78, "bash", "bash")}
    pane.sample_foreground(42, programs.get)
    pane.receive(b"$ sleep 100\r\n")
    read(pane)
    assert (pane.decision.state, pane.decision.source) == (State.idle, Source.screen)
    assert not pane.quiet_since_sampled  # sampled with the Enter's echo: the fork may come after it
    assert pane.sample_foreground(77, programs.get)
    read(pane)  # one read after the group changed
    assert (pane.decision.state, pane.decision.source, pane.decision.program) == (
        State.working,
        Source.process,
        "sleep",
    )
    clock.advance(2.5)
    pane.sample_foreground(77, programs.get)
    assert pane.quiet_since_sampled  # sampled well after the last output: the sweep leaves it be
    pane.receive(b"^C\r\n$ ")
    assert pane.sample_foreground(42, programs.get)
    read(pane)
    assert (pane.decision.state, pane.decision.source) == (State.idle, Source.screen)
    pane.sample_foreground(78, programs.get)  # a nested shell at its prompt is not a program at work
    read(pane)
    assert pane.decision.state == State.idle
    pane.receive(b"Drop old tables? [y/N] ")
    pane.sample_foreground(77, programs.get)
    read(pane)  # a prompt on screen still wins
    assert (pane.decision.state, pane.decision.rule) == (State.blocked, "yes_no_prompt")


def test_an_agent_pane_is_not_working_because_of_its_foreground():
    clock = ManualClock()
    pane = claude_pane(clock)
    pane.receive(IDLE)
    pane.sample_foreground(77, {77: Program(77, "node", "node")}.get)
    read(pane)
    assert (pane.decision.state, pane.decision.source) == (State.idle, Source.screen)


def test_exit_and_loss_are_final():
    clock = ManualClock()
    pane = claude_pane(clock)
    pane.set_exit(3)
    read(pane)
    assert (pane.decision.state, pane.decision.exit_code, pane.decision.decided_by) == (State.exited, 3, "3")
    assert pane.final
    lost = claude_pane(clock)
    lost.set_exit(None)
    read(lost)
    assert (lost.decision.state, lost.decision.source, lost.decision.decided_by) == (State.lost, Source.exit, None)
    assert lost.final
