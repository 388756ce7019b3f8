"""What a pane *is*: its screen, its signals and the decision they give — no I/O, no host.

A pane is fed bytes (by whichever host carries them), told about its foreground program and
the agent's reports, and asked to classify itself. The clock is injected, so every rule here
(freshness, "shell back", the screen's last change) is tested without a process or a sleep.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..backends import ScreenLike
from ..manifest import CompiledManifest, ManifestStore, Verdict
from ..oob import NOTIFICATIONS_KEPT, Notification, Status
from ..procs.procinfo import Program, is_shell
from ..states import Decision, Source, State
from .asks import Request, merged, screen_request
from .signals import Report, combine, report_is_fresh

#: How often the foreground program's name is re-read when its process group stays the same.
FG_REREAD_S = 2.0

#: A foreground sample taken this soon after output may predate the group change that output
#: announced (a shell echoes the Enter, *then* forks the command): sampled again until one is later.
FG_SETTLE_S = 0.5

#: Output with no gap this long is one burst (one repaint, written at once or split by the PTY).
BURST_GAP_S = 0.02

#: Gaps between bursts up to this long are a pane's drawing rhythm; longer ones are pauses.
RHYTHM_MAX_S = 0.3

STARTING = Decision(State.working, Source.start, "starting")

#: The manifest for a foreground program that no manifest names (structural rules, a best guess).
GENERIC = "generic"


@dataclass
class Foreground:
    """Which program holds the pane's terminal, as last sampled."""

    pgid: int | None = None
    program: Program | None = None
    gen: int = 0  # bumped whenever the group or its program changes
    read_at: float = float("-inf")
    bytes_at: int = -1  # the pane's ``bytes_read`` when the program was last looked up


class Pane:
    """One pane's screen, signals and decision. ``clock`` is monotonic seconds; ``wall`` is
    the wall clock the decision's ``since`` is given in."""

    def __init__(
        self,
        screen: ScreenLike,
        *,
        agent: str | None,
        clock: Callable[[], float],
        wall: Callable[[], float],
        own_pid: int | None = None,
        runs_shell: bool = False,
    ) -> None:
        self.screen = screen
        self.agent = agent  # the manifest the session was launched for
        self.runs_shell = runs_shell  # launched as a shell (bash, sh -c …): what it runs is the shell's to read
        self.clock = clock
        self.wall = wall
        self.own_pid = own_pid  # the launched process (its shell coming back means "shell back")
        self.pending = bytearray()  # received, not yet fed to the screen
        self.unread_bytes = 0  # output since the screen was last classified
        self.burst_bytes = 0  # output since the last gap of ``BURST_GAP_S`` (one repaint)
        self.rhythm = 0.0  # smoothed gap between bursts shorter than RHYTHM_MAX_S
        self.bytes_read = 0
        self.bytes_fed = 0
        self.last_output = clock()
        self.exit_code: int | None = None
        self.exited = False
        self.lost = False
        self.exact: Decision | None = None  # the state a host states exactly (ACP), not read
        self.report: Report | None = None
        self.report_gen = 0
        self.fg = Foreground()
        self.agent_seen = False  # an agent with its own manifest has held the foreground
        self.verdict = Verdict(State.idle, None, "not classified yet")
        self.manifest_agent: str | None = agent
        self.screen_changed_at = float("-inf")
        self.read_at = float("-inf")  # when the screen was last classified
        self.decision = STARTING.at(wall())
        #: what the pane asks while blocked (``asks``), read with the decision; None otherwise
        self.request: Request | None = None
        self.unblocked_at = float("-inf")  # when it last stopped being blocked (clock)
        self._classified: tuple[int, int, int, int, int] | None = None
        # start-up: until a rule of the agent's manifest matched once, or its startup_timeout
        # passed, a screen no rule matches reads working (source start), not idle
        self.started = clock()
        self.rule_seen = False
        self.startup_deadline = float("-inf")
        # out-of-band signals (screen.oob): the status and when this pane first saw it
        self.oob_seq = 0
        self.status_at = float("-inf")
        self._status_seen: Status | None = None
        #: the agent's desktop notifications (OSC 9/99/777) not yet taken by the engine
        self.desktop: list[Notification] = []
        self._notified_seen = 0

    # -- bytes -----------------------------------------------------------------------------
    def receive(self, data: bytes) -> None:
        """Bytes arrived from the host; they wait in ``pending`` for the scheduler's feed."""
        self.bytes_read += len(data)
        self.unread_bytes += len(data)
        now = self.clock()
        gap = now - self.last_output
        if gap >= BURST_GAP_S:
            self.burst_bytes = 0
        self.burst_bytes += len(data)
        if 0 < gap < RHYTHM_MAX_S:  # the pane's own drawing rhythm (a spinner's tick), smoothed
            self.rhythm = gap if not self.rhythm else self.rhythm + (gap - self.rhythm) / 4
        self.last_output = now
        self.pending += data

    def feed(self, budget: int) -> int:
        """Feed at most ``budget`` pending bytes to the screen; returns how many were fed."""
        if not self.pending:
            return 0
        chunk = bytes(self.pending[:budget])
        del self.pending[: len(chunk)]
        self.screen.feed(chunk)
        self.bytes_fed += len(chunk)
        self._note_out_of_band()
        return len(chunk)

    def _note_out_of_band(self) -> None:
        """Stamp a new OSC 7501 status with the time it arrived, and keep the agent's new
        desktop notifications for the engine to take (``take_desktop``); the last few also
        stay on ``screen.oob`` for /explain."""
        oob = self.screen.oob
        if oob.seq == self.oob_seq:
            return
        if oob.status is not self._status_seen:  # a new statement, even if it repeats the last
            self._status_seen = oob.status
            self.status_at = self.clock()
        self.oob_seq = oob.seq
        notified = oob.notified
        new = min(notified - self._notified_seen, len(oob.notifications))
        self._notified_seen = notified
        if new > 0:  # more than the screen keeps between two feeds: the newest (bounded) ones
            self.desktop.extend(list(oob.notifications)[-new:])
            del self.desktop[:-NOTIFICATIONS_KEPT]

    def take_desktop(self) -> list[Notification]:
        """The desktop notifications fed since the last call (oldest first)."""
        taken, self.desktop = self.desktop, []
        return taken

    @property
    def status(self) -> Status | None:
        """The agent's latest out-of-band status (OSC 7501), if its screen keeps one."""
        return self.screen.oob.status

    def feed_all(self) -> int:
        fed = 0
        while self.pending:
            fed += self.feed(1 << 20)
        return fed

    # -- signals ---------------------------------------------------------------------------
    def sample_foreground(self, pgid: int | None, lookup: Callable[[int], Program | None]) -> bool:
        """Note the terminal's foreground group; True if it or its program changed.

        ``lookup`` (reading /proc) runs when the group changes, and every ``FG_REREAD_S``
        otherwise: a program can exec or rename itself in place.
        """
        if self.exited:
            return False
        fg, now = self.fg, self.clock()
        if pgid == fg.pgid and now - fg.read_at < FG_REREAD_S:
            return False
        fg.read_at, fg.bytes_at = now, self.bytes_read
        program = lookup(pgid) if pgid and pgid > 0 else None
        if pgid == fg.pgid and program == fg.program:
            return False
        fg.pgid, fg.program = pgid, program
        fg.gen += 1
        return True

    @property
    def quiet_since_sampled(self) -> bool:
        """No output since the foreground program was last looked up. A program that takes or
        gives back the terminal prints something (a prompt, a first frame), so a pane that has
        been quiet since needs no sampling: an idle pane costs nothing per sweep (once a sample
        was taken ``FG_SETTLE_S`` after the output: ``sleep 100`` prints nothing after its echo)."""
        fg = self.fg
        return fg.bytes_at == self.bytes_read and fg.read_at - self.last_output >= FG_SETTLE_S

    def set_report(self, report: Report) -> None:
        self.report = report
        self.report_gen += 1

    def set_exit(self, code: int | None) -> None:
        """The process is gone: ``code`` None means the host lost it without a status."""
        self.exit_code = code
        self.exited = True
        self.lost = code is None

    def manifest(self, store: ManifestStore) -> CompiledManifest | None:
        """The foreground program's own manifest (``claude`` typed into a shell pane), else the
        launched agent's, else — for a launched program no manifest names — the generic one, else
        the shell's (what a shell session runs, ``sleep`` or ``make``, is the shell's to read). A shell in the foreground never overrides the launched agent: wrappers and
        ``bash -c`` launchers are shells too; and a shell (or a pane not sampled yet) keeps the
        shell's rules, which only ever read a prompt on the cursor line."""
        program = self.fg.program
        if program is not None:
            found = store.for_process(program.name) or store.for_process(program.comm)
            if found is not None and found.agent != "shell":
                self.agent_seen = True
                return found
        if self.agent:
            found = store.get(self.agent)
            if found is not None:
                return found
        if program is not None and not self.runs_shell and not is_shell(program.name) and not is_shell(program.comm):
            found = store.get(GENERIC)
            if found is not None:
                return found
        return store.get("shell")

    def shell_back(self) -> str | None:
        """The shell's name when an agent ran in this pane and the pane's own shell holds the
        terminal again (the agent's last screen may still be showing)."""
        program = self.fg.program
        if not self.agent_seen or program is None or self.own_pid is None or program.pid != self.own_pid:
            return None
        return program.name if is_shell(program.name) else None

    def shell_busy(self, manifest: CompiledManifest | None) -> str | None:
        """The program a shell pane's shell is waiting for (``sleep 100``, ``make``): read by
        the shell's manifest, a foreground group that is neither the pane's own process nor
        another shell. None for an agent's manifest, or while the shell holds the terminal."""
        program = self.fg.program
        if manifest is None or manifest.agent != "shell" or program is None or self.own_pid is None:
            return None
        if program.pid == self.own_pid or is_shell(program.name) or is_shell(program.comm):
            return None
        return program.name

    # -- classification --------------------------------------------------------------------
    def set_exact(self, decision: Decision) -> None:
        """The host states this pane's state exactly (ACP): from now on that is the decision,
        and the screen (the host's own drawing) is never read for it."""
        self.exact = decision

    def classify(self, store: ManifestStore, freshness: float) -> Decision:
        """Read the screen now and combine it with the other signals (not recorded)."""
        if self.exact is not None:
            self._classified = (self.screen.seq, self.report_gen, self.fg.gen, store.generation, self.oob_seq)
            if self.exited and self.exact.state != State.exited:  # gone before the host said why
                self.exact = Decision(
                    State.exited, Source.exit, f"exit code {self.exit_code}", exit_code=self.exit_code
                )
            return self.exact
        now = self.clock()
        manifest = self.manifest(store)
        if manifest is None:
            verdict = Verdict(State.idle, None, "no manifest for this program")
        else:
            verdict = manifest.classify(self.screen.lines(), self.screen.title, self.screen.cursor.row)
        self.manifest_agent = manifest.agent if manifest else None
        if verdict.state != self.verdict.state:
            self.screen_changed_at = now
        self.verdict = verdict
        if verdict.rule is not None:
            self.rule_seen = True
        timeout = manifest.manifest.startup_timeout if manifest is not None else 0.0
        self.startup_deadline = self.started + timeout
        self.unread_bytes = 0
        self.read_at = now
        self._classified = (self.screen.seq, self.report_gen, self.fg.gen, store.generation, self.oob_seq)
        if self.lost:
            self.request = None
            return Decision(State.lost, Source.exit, "the host lost the pane without an exit status")
        decision = combine(
            verdict,
            report=self.report,
            now=now,
            freshness=freshness,
            screen_changed_at=self.screen_changed_at,
            shell_back=self.shell_back(),
            shell_busy=self.shell_busy(manifest),
            exit_code=self.exit_code,
            exited=self.exited,
            starting=not self.rule_seen and now < self.startup_deadline,
            status=self.status,
            status_at=self.status_at,
        )
        self.request = self._read_request(manifest, decision, now, freshness)
        return decision

    def _read_request(
        self, manifest: CompiledManifest | None, decision: Decision, now: float, freshness: float
    ) -> Request | None:
        """What a blocked pane asks: the agent's own blocked report if it came in this blocked
        stretch (or just before it) and is younger than ``freshness``, and the screen's reading."""
        if decision.state != State.blocked:
            return None
        report = self.report
        structured = None
        if (
            report is not None
            and report.state == State.blocked
            and report.at >= self.unblocked_at
            and now - report.at <= freshness
        ):
            structured = report.request
        rule = self.verdict.rule if self.verdict.state == State.blocked else None
        screen = self.screen
        on_screen = screen_request(manifest, rule, screen.lines(), screen.title, screen.cursor.row)
        return merged(structured, on_screen)

    def needs_classify(self, store: ManifestStore, freshness: float) -> bool:
        """False when neither the screen nor any signal moved since the last classification."""
        if self._classified != (self.screen.seq, self.report_gen, self.fg.gen, store.generation, self.oob_seq):
            return True
        # a start-up that timed out, or a report that just went stale, changes the answer
        # without anything else moving
        if self.decision.source == Source.start and self.clock() >= self.startup_deadline:
            return True
        return self.decision.source == Source.hook and not report_is_fresh(
            self.report, self.clock(), freshness, self.screen_changed_at
        )

    @property
    def final(self) -> bool:
        """Exited (or lost) and already classified as such: nothing can change any more."""
        return self.exited and self.decision.state in (State.exited, State.lost)

    def set_decision(self, decision: Decision) -> Decision | None:
        """Record a decision; returns the previous one if the state changed (``since`` moves
        only then)."""
        prev = self.decision
        if prev.state == State.blocked and decision.state != State.blocked:
            self.unblocked_at = self.clock()
        if decision.state != prev.state:
            self.decision = decision.at(self.wall())
            return prev
        self.decision = decision.at(prev.since)
        return None
