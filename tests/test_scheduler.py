"""The scheduler on a hand-moved clock: feed budgets, backpressure, the sweep, change mode.
No process, no sleeping: panes are fed bytes directly and time moves only when told."""

from __future__ import annotations

import itertools

import pytest

from panewatch.clock import ManualClock
from panewatch.panes.pane import Pane
from panewatch.panes.scheduler import Scheduler, Timing
from panewatch.screen import Screen

pytestmark = pytest.mark.unit


class Flow:
    """Records what the scheduler asked for."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str | float]] = []

    def fed(self, key: str) -> None:
        self.calls.append(("fed", key))

    def pause(self, key: str) -> None:
        self.calls.append(("pause", key))

    def resume(self, key: str) -> None:
        self.calls.append(("resume", key))

    def sweep(self, now: float, spent: object = None) -> bool:
        self.calls.append(("sweep", now))
        return True

    def due(self, key: str, now: float) -> None:
        self.calls.append(("due", key))

    def of(self, kind: str) -> list[str | float]:
        return [arg for k, arg in self.calls if k == kind]


def make(timing: Timing, perf_step: float = 0.0) -> tuple[ManualClock, Flow, Scheduler]:
    clock, flow = ManualClock(), Flow()
    ticks = itertools.count()
    perf = (lambda: next(ticks) * perf_step) if perf_step else (lambda: 0.0)
    return clock, flow, Scheduler(clock, timing, flow, perf=perf)


def pane(clock: ManualClock, rows: int = 6, cols: int = 40) -> Pane:
    return Pane(Screen(rows, cols), agent=None, clock=clock.time, wall=clock.time)


def deliver(sched: Scheduler, key: str, p: Pane, data: bytes) -> None:
    p.receive(data)
    sched.output(key)


def test_a_flooding_pane_gets_one_budget_per_turn_and_a_quiet_one_is_fed_at_once():
    # each perf() call costs 6 ms of a 20 ms tick: a tick ends after four slices
    clock, flow, sched = make(Timing(feed_budget=1000, tick_budget_s=0.02), perf_step=0.006)
    flood, quiet = pane(clock), pane(clock)
    sched.add("flood", flood)
    sched.add("quiet", quiet)
    deliver(sched, "flood", flood, b"x" * 50_000)
    deliver(sched, "quiet", quiet, b"hello")
    clock.tick()  # one turn of the loop
    assert quiet.bytes_fed == 5 and not quiet.pending
    assert flood.bytes_fed == 3 * 1000  # a budget per slice, not the whole flood
    turns = 0
    while clock.tick():
        turns += 1
    assert turns > 10  # the flood took many turns: the loop was free in between
    assert flood.bytes_fed == 50_000 and not flood.pending
    assert flow.of("fed").count("quiet") == 1


def test_backlog_above_high_water_pauses_the_host_until_below_low_water():
    clock, flow, sched = make(Timing(feed_budget=100, high_water=1000, low_water=300), perf_step=0.05)
    p = pane(clock)
    sched.add("a", p)
    deliver(sched, "a", p, b"y" * 900)
    assert flow.of("pause") == []
    deliver(sched, "a", p, b"y" * 200)  # 1100 pending > high water
    assert flow.of("pause") == ["a"]
    deliver(sched, "a", p, b"y" * 50)  # paused already: asked once
    assert flow.of("pause") == ["a"]
    while flow.of("resume") == []:
        assert clock.tick(), "feeding stopped before the backlog drained"
    assert len(p.pending) < 300  # resumed only below low water
    assert sched.backlog() == len(p.pending)


def test_the_sweep_runs_every_interval_and_is_timed():
    clock, flow, sched = make(Timing(sweep_s=0.5))
    sched.start()
    clock.advance(2.0)
    assert flow.of("sweep") == [1000.5, 1001.0, 1001.5, 1002.0]
    assert sched.sweeps == 4 and len(sched.sweep_seconds) == 4
    sched.stop()
    clock.advance(5.0)
    assert sched.sweeps == 4


def test_change_mode_sweeps_at_the_sweep_pace_as_its_shared_tick():
    clock, flow, sched = make(Timing(mode="change", sweep_s=0.5))
    sched.start()
    clock.advance(2.0)
    assert flow.of("sweep") == [1000.5, 1001.0, 1001.5, 1002.0]


def test_change_mode_reads_a_big_repaint_once_output_pauses():
    clock, flow, sched = make(Timing(mode="change", sweep_s=5.0, settle_s=0.04, cap_s=0.15, change_bytes=256))
    p = pane(clock, 12, 60)
    sched.add("a", p)
    deliver(sched, "a", p, b"z" * 300)
    clock.advance(0.03)
    assert flow.of("due") == []
    clock.advance(0.02)  # quiet for settle_s
    assert flow.of("due") == ["a"] and not p.pending


def test_change_mode_caps_the_wait_under_output_that_never_pauses():
    clock, flow, sched = make(Timing(mode="change", sweep_s=5.0, settle_s=0.04, cap_s=0.15, change_bytes=256))
    p = pane(clock, 12, 60)
    sched.add("a", p)
    for _ in range(20):  # 300 bytes every 10 ms for 200 ms: never quiet for 40 ms
        deliver(sched, "a", p, b"w" * 300)
        clock.advance(0.01)
    assert flow.of("due")[:1] == ["a"]
    first = next(i for i, (k, _) in enumerate(flow.calls) if k == "due")
    assert first > 0
    assert len(flow.of("due")) <= 2  # about once per cap, not once per chunk


def test_change_mode_reads_small_changes_once_output_pauses_not_per_frame():
    clock, flow, sched = make(
        Timing(mode="change", sweep_s=5.0, settle_s=0.04, cap_s=0.15, change_bytes=256, pause_s=0.12)
    )
    sched.start()
    ticks: list[float] = []
    tick = sched._read_tick
    sched._read_tick = lambda: (ticks.append(clock.time()), tick())[1]  # type: ignore[method-assign]
    p, q = pane(clock), pane(clock)
    sched.add("a", p)
    sched.add("b", q)
    for _ in range(15):  # a spinner: 10 bytes every 50 ms, never change_bytes in all
        deliver(sched, "a", p, b"\r* Work 01")
        deliver(sched, "b", q, b"\r* Work 02")
        clock.advance(0.05)
    # still spinning: no read, and no timer of a pane's own (one shared pause timer)
    assert flow.of("due") == [] and len(sched._due) == 2
    assert ticks == []  # and no wake-up: their frames only moved their due times
    clock.advance(0.1)  # both stopped 0.12 s ago: both read, at one wake-up
    assert len(ticks) == 1
    assert flow.of("due") == ["a", "b"]
    clock.advance(1.0)
    assert flow.of("due") == ["a", "b"]  # nothing new: no more reads


def test_spinner_frames_adding_up_past_change_bytes_are_still_small_changes():
    # Claude's spinner line is ~70 bytes at 10 Hz: four frames pass change_bytes between two
    # reads, but each is a burst of its own, so a working pane is not read every fourth frame
    clock, flow, sched = make(
        Timing(mode="change", sweep_s=5.0, settle_s=0.04, cap_s=0.15, change_bytes=256, pause_s=0.12)
    )
    sched.start()
    p = pane(clock, 12, 80)
    sched.add("a", p)
    for _ in range(30):  # 3 s of frames: 2,100 bytes unread in all
        deliver(sched, "a", p, b"\x1b[5A\r* Sauteing... (2s - 47 tokens - esc to interrupt)\x1b[K\x1b[5B\r")
        clock.advance(0.1)
    assert flow.of("due") == []
    # the dialog: one repaint of a few hundred bytes, read once it settles
    deliver(sched, "a", p, b"\x1b[2J\x1b[H" + b"Do you want to proceed?\r\n" * 12)
    clock.advance(0.05)
    assert flow.of("due") == ["a"]


def test_a_repaint_cut_by_the_cap_has_its_tail_read_at_its_own_settle():
    clock, flow, sched = make(Timing(mode="change", sweep_s=5.0, settle_s=0.04, cap_s=0.15, change_bytes=256))
    p = pane(clock, 12, 60)
    sched.add("a", p)
    for _ in range(16):  # one burst of 160 ms: the cap reads it mid-way
        deliver(sched, "a", p, b"r" * 300)
        clock.advance(0.01)
    assert flow.of("due") == ["a"]
    deliver(sched, "a", p, b"t" * 10)  # its last few bytes, still the same burst
    clock.advance(0.045)
    assert flow.of("due") == ["a", "a"]  # read 40 ms after the tail, not after a pause


def test_the_sweep_leaves_a_flowing_pane_to_its_pause_read_until_the_backstop():
    _, _, sched = make(Timing(mode="change", pause_s=0.12, backstop_s=2.8))
    clock = sched.clock
    p = pane(clock)
    p.receive(b"x")
    p.read_at = clock.time() - 1.0
    assert sched.flowing(p, clock.time())
    p.read_at = clock.time() - 3.0  # not read for longer than the backstop: the sweep reads it
    assert not sched.flowing(p, clock.time())
    p.read_at = clock.time()
    clock.advance(0.2)  # output paused: not flowing (its pause read happened or is due)
    assert not sched.flowing(p, clock.time())
    _, _, sweep_sched = make(Timing(mode="sweep"))
    assert not sweep_sched.flowing(pane(clock), clock.time())


def test_a_forgotten_pane_is_never_read_again():
    clock, flow, sched = make(Timing(mode="change", settle_s=0.04, change_bytes=10))
    p = pane(clock)
    sched.add("a", p)
    deliver(sched, "a", p, b"q" * 100)
    sched.forget("a")
    clock.advance(1.0)
    assert flow.of("due") == [] and flow.of("fed") == []


@pytest.mark.parametrize("mode", ["sweep", "change"])
def test_sweep_interval_property(mode):
    t = Timing(mode=mode, sweep_s=0.7)
    assert t.sweep_interval == 0.7


def test_a_pane_drawing_slower_than_pause_s_is_not_read_at_every_tick():
    clock, flow, sched = make(Timing(mode="change", sweep_s=5.0, change_bytes=256, pause_s=0.12))
    sched.start()
    p = pane(clock)
    sched.add("a", p)
    for _ in range(20):  # a spinner ticking every 150 ms (a busy machine): not a pause each time
        deliver(sched, "a", p, b"\r* Work 01")
        clock.advance(0.15)
    assert len(flow.of("due")) <= 2  # the first ticks, before its rhythm is known
    clock.advance(0.3)
    assert flow.of("due")[-1:] == ["a"]  # it stopped: read


def test_a_sweep_longer_than_a_turn_goes_on_at_the_next_turns_and_counts_once():
    clock, flow, sched = make(Timing(sweep_s=0.5, tick_budget_s=0.02))
    slices: list[float] = []

    def sweep(now: float, spent: object) -> bool:  # three turns' worth of panes
        slices.append(now)
        return len(slices) % 3 == 0

    flow.sweep = sweep  # type: ignore[method-assign]
    sched.start()
    clock.advance(0.5)
    assert slices == [1000.5] * 3 and sched.sweeps == 1  # sliced over turns, not interval
    clock.advance(0.5)
    assert len(slices) == 6 and sched.sweeps == 2


def test_reads_due_at_once_past_the_turn_budget_wait_for_the_next_turn():
    # every perf() call costs 8 ms of a 20 ms turn: two or three reads per turn, not all ten
    clock, flow, sched = make(
        Timing(mode="change", sweep_s=5.0, settle_s=0.04, change_bytes=10, tick_budget_s=0.02), perf_step=0.008
    )
    panes = {f"p{i}": pane(clock) for i in range(10)}
    for key, p in panes.items():
        sched.add(key, p)
        deliver(sched, key, p, b"x" * 50)
    clock.advance(0.03)
    clock.now += 0.02  # settled: all ten due at once
    clock.tick()  # one turn
    first = len(flow.of("due"))
    assert 1 <= first < 10
    while clock.tick():
        pass
    assert sorted(flow.of("due")) == sorted(panes)  # every pane read, over later turns
