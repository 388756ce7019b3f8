"""One pane: an agent in a PTY, its emulated screen, its signals and its current state."""

from __future__ import annotations

import os
import secrets
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from .manifest import CompiledManifest, ManifestStore, Verdict
from .procinfo import Program, is_shell, program_name
from .ptyproc import PtyProcess
from .backends import ScreenLike, make_screen
from .oob import Notification as AgentNotification
from .oob import Status
from .signals import Decision, Report, combine, report_is_fresh
from .transcript import Transcript

RAW_RING = 64 * 1024
#: How often the foreground program's name is re-read when its process group stays the same.
FG_REREAD_S = 2.0

#: Variables of the service that an agent must not inherit (the API token above all).
PRIVATE_ENV = ("PANEWATCH_TOKEN",)


@dataclass
class SessionSpec:
    """What to launch: an agent's manifest and/or an explicit command."""

    agent: str | None = None
    command: list[str] | None = None
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    rows: int = 32
    cols: int = 120
    hooks: bool = True
    name: str | None = None


def expand_command(command: Sequence[str]) -> list[str]:
    """``{python}`` in a manifest's command is the interpreter running Panewatch."""
    return [sys.executable if part == "{python}" else part for part in command]


class Session:
    """A pane. Owns the PTY process, the screen, the raw ring buffer and the state record."""

    def __init__(self, sid: str, spec: SessionSpec, argv: list[str], agent: str | None,
                 clock: Callable[[], float], backend: str = "pyte") -> None:
        self.id = sid
        self.spec = spec
        self.argv = argv
        self.agent = agent  # the manifest the session was launched for
        self.name = spec.name or agent or (os.path.basename(argv[0]) if argv else sid)
        self.cwd = spec.cwd or os.getcwd()
        self.clock = clock
        self.created = time.time()
        self.report_token = secrets.token_urlsafe(24)
        self.screen: ScreenLike = make_screen(backend, spec.rows, spec.cols, reply=self._reply)
        self.proc: PtyProcess | None = None
        self.raw = bytearray()
        self.pending = bytearray()  # read from the PTY, not yet fed to the screen
        self.unread_bytes = 0  # output since the screen was last classified
        self.hot_until = float("-inf")  # change mode: read small changes promptly until then
        self.bytes_read = 0
        self.last_output = clock()
        self.error: str | None = None
        self.exit_code: int | None = None
        self.exited = False
        # signals
        self.report: Report | None = None
        self.report_gen = 0
        self.permission_requested_at: float | None = None
        self.fg_pgid: int | None = None
        self.fg: Program | None = None
        self.fg_gen = 0  # bumped whenever the foreground group or its program changes
        self._fg_read_at = float("-inf")
        self.agent_seen = False  # an agent with its own manifest has held the foreground
        # classification
        self.verdict = Verdict("idle", None, "not classified yet")
        self.manifest_agent: str | None = agent
        self.screen_changed_at = float("-inf")
        self.decision = Decision("working", "start", None, "starting")
        # start-up: until a rule of the agent's manifest matched once, or its startup_timeout
        # passed, a screen no rule matches reads working (source "start"), not idle
        self.started_mono = clock()
        self.rule_seen = False
        self.startup_deadline = float("-inf")
        # out-of-band signals (screen.oob): the status and when this session first saw it
        self.oob_seq = 0
        self.status_at = float("-inf")
        self._status_seen: Status | None = None
        self.agent_notified = 0  # desktop notifications the agent raised (OSC 9/99/777) so far
        self.agent_notes: list[AgentNotification] = []  # not yet published
        self.since = time.time()
        self.since_mono = clock()
        self.classified: tuple[int, int, int | None, int, int] | None = None
        self.watchers: set[Callable[[], None]] = set()
        self.output_listeners: list[Callable[[bytes], None]] = []
        self.transcript: Transcript | None = None  # set by the runtime when recordings are on
        self.bytes_fed = 0  # bytes emulated so far (for /metrics)

    # -- PTY plumbing ----------------------------------------------------------------------
    def _reply(self, data: bytes) -> None:
        """Answers to the agent's terminal queries go straight back into its input."""
        if self.proc is not None and self.proc.alive:
            self.proc.write(data)

    def on_output(self, data: bytes) -> None:
        self.bytes_read += len(data)
        self.last_output = self.clock()
        self.raw += data
        if len(self.raw) > RAW_RING:
            del self.raw[: len(self.raw) - RAW_RING]
        self.pending += data
        for listener in self.output_listeners:
            listener(data)

    def feed(self, budget: int) -> int:
        """Feed at most ``budget`` pending bytes to the screen; returns how many were fed."""
        if not self.pending:
            return 0
        chunk = bytes(self.pending[:budget])
        del self.pending[: len(chunk)]
        self.screen.feed(chunk)
        self.bytes_fed += len(chunk)
        oob = getattr(self.screen, "oob", None)
        if oob is not None and oob.notified != self.agent_notified:
            fresh = min(oob.notified - self.agent_notified, len(oob.notifications))
            self.agent_notes.extend(list(oob.notifications)[-fresh:] if fresh else [])
            self.agent_notified = oob.notified
        if oob is not None and oob.seq != self.oob_seq:
            if oob.status is not self._status_seen:  # a new statement, even if it repeats the last
                self._status_seen = oob.status
                self.status_at = self.clock()
            self.oob_seq = oob.seq
        for notify in list(self.watchers):
            notify()
        return len(chunk)

    def feed_all(self) -> None:
        while self.pending:
            self.feed(1 << 20)

    # -- signals ---------------------------------------------------------------------------
    def sample_foreground(self) -> bool:
        """Re-read the terminal's foreground process group; True if it or its program changed.

        The group is one ioctl; the program's name is re-read when the group changes, and
        every ``FG_REREAD_S`` otherwise (a program can exec or rename itself in place).
        """
        if self.proc is None or self.exited:
            return False
        pgid = self.proc.foreground_pgid()
        now = self.clock()
        if pgid == self.fg_pgid and now - self._fg_read_at < FG_REREAD_S:
            return False
        self._fg_read_at = now
        program = program_name(pgid) if pgid and pgid > 0 else None
        if pgid == self.fg_pgid and program == self.fg:
            return False
        self.fg_pgid, self.fg = pgid, program
        self.fg_gen += 1
        return True

    def manifest(self, store: ManifestStore) -> CompiledManifest | None:
        """The foreground program's own manifest (``claude`` typed into a shell pane), else the
        launched agent's, else the shell's. A shell in the foreground never overrides the
        launched agent: wrappers and ``bash -c`` launchers are shells too."""
        if self.fg is not None:
            found = store.for_process(self.fg.name) or store.for_process(self.fg.comm)
            if found is not None and found.agent != "shell":
                self.agent_seen = True
                return found
        if self.agent:
            found = store.get(self.agent)
            if found is not None:
                return found
        return store.get("shell")

    @property
    def status(self) -> Status | None:
        """The agent's latest out-of-band status (OSC 7501), if its screen keeps one."""
        oob = getattr(self.screen, "oob", None)
        return oob.status if oob is not None else None

    def shell_back(self) -> str | None:
        """The shell's name when an agent ran in this pane and the pane's own shell holds the
        terminal again (the agent's last screen may still be showing)."""
        if not self.agent_seen or self.fg is None or self.proc is None or self.fg.pid != self.proc.pid:
            return None
        return self.fg.name if is_shell(self.fg.name) else None

    def classify(self, store: ManifestStore, freshness: float) -> Decision:
        """Read the screen now and combine it with the other signals."""
        now = self.clock()
        manifest = self.manifest(store)
        lines = self.screen.lines()
        if manifest is None:
            verdict = Verdict("idle", None, "no manifest for this program")
        else:
            verdict = manifest.classify(lines, self.screen.title, self.screen.cursor.row)
        self.manifest_agent = manifest.agent if manifest else None
        if verdict.state != self.verdict.state:
            self.screen_changed_at = now
        self.verdict = verdict
        if verdict.rule is not None:
            self.rule_seen = True
        timeout = manifest.manifest.startup_timeout if manifest is not None else 0.0
        self.startup_deadline = self.started_mono + timeout
        starting = not self.rule_seen and now < self.startup_deadline
        self.classified = (self.screen.seq, self.report_gen, self.fg_gen, store.generation, self.oob_seq)
        return combine(
            verdict,
            report=self.report,
            now=now,
            freshness=freshness,
            screen_changed_at=self.screen_changed_at,
            shell_back=self.shell_back(),
            exit_code=self.exit_code,
            exited=self.exited,
            starting=starting,
            status=self.status,
            status_at=self.status_at,
        )

    def needs_classify(self, store: ManifestStore, freshness: float) -> bool:
        """False when neither the screen nor any signal moved since the last classification."""
        if self.classified != (self.screen.seq, self.report_gen, self.fg_gen, store.generation, self.oob_seq):
            return True
        # a start-up that timed out, or a report that just went stale, changes the answer
        # without anything else moving
        if self.decision.source == "start" and self.clock() >= self.startup_deadline:
            return True
        return self.decision.source == "hook" and not report_is_fresh(
            self.report, self.clock(), freshness, self.screen_changed_at)

    def set_decision(self, decision: Decision) -> Decision | None:
        """Record a new decision; returns the previous one if the state changed."""
        prev = self.decision
        self.decision = decision
        if decision.state != prev.state:
            self.since = time.time()
            self.since_mono = self.clock()
            return prev
        return None

    def info(self) -> dict[str, object]:
        d = self.decision
        return {
            "id": self.id,
            "name": self.name,
            "agent": self.manifest_agent or self.agent,
            "launched_agent": self.agent,
            "command": self.argv,
            "cwd": self.cwd,
            "state": d.state,
            "since": self.since,
            "source": d.source,
            "rule": d.rule,
            "why": d.why,
            "pid": self.proc.pid if self.proc else None,
            "foreground": self.fg.name if self.fg else None,
            "foreground_pid": self.fg_pgid,
            "exit_code": self.exit_code,
            "error": self.error,
            "rows": self.screen.rows,
            "cols": self.screen.cols,
            "title": self.screen.title,
            "created": self.created,
            "bytes_read": self.bytes_read,
            "transcript": self.transcript.info() if self.transcript else None,
        }


def child_env(base: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    """The agent's environment: the service's own minus its secrets, a real terminal's TERM."""
    env = {k: v for k, v in base.items() if k not in PRIVATE_ENV}
    env.update({"TERM": "xterm-256color", "COLORTERM": "truecolor"})
    env.update(extra)
    return env


def resolve_program(argv: list[str], env: Mapping[str, str]) -> str | None:
    """Where argv[0] would be found with the child's PATH (None if nowhere)."""
    if os.sep in argv[0]:
        return argv[0] if os.access(argv[0], os.X_OK) else None
    return shutil.which(argv[0], path=env.get("PATH"))
