"""The engine: every session's PTY feeding its screen, the sweep, state events, guarded writes.

Work on the event loop is bounded: PTY bytes are queued on arrival and fed to the emulator in
slices of at most ``FEED_BUDGET`` bytes per session per tick, round-robin, so one pane that
floods output cannot starve the others (or the HTTP server). A pane whose backlog grows past
``HIGH_WATER`` stops being read until it drains, which blocks that agent's writes as a real
terminal that cannot keep up would. Readers are never gated on browser clients.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import time
from pathlib import Path
from dataclasses import asdict, dataclass
from typing import Any, Literal

from .backends import screen_class
from .hooks import claude_settings, state_from_payload
from .manifest import ManifestStore
from .notify import Notifier
from .ptyproc import PtyProcess, SpawnError
from .session import Session, SessionSpec, child_env, expand_command, resolve_program
from .signals import Decision, Report
from .transcript import Transcript

log = logging.getLogger("panewatch.runtime")

FEED_BUDGET = 16 * 1024
TICK_BUDGET_S = 0.02
HIGH_WATER = 512 * 1024
LOW_WATER = 64 * 1024

#: A permission Notification this soon after a PermissionRequest repeats that prompt.
REDUNDANT_NOTIFICATION_S = 60.0

Mode = Literal["sweep", "change"]


class SessionError(Exception):
    """A request about a session that cannot be honoured (unknown agent, no command...)."""


class NotFound(SessionError):
    pass


class Conflict(SessionError):
    """The pane's state forbids this write right now (e.g. ``send`` to a blocked pane)."""

    def __init__(self, message: str, decision: Decision) -> None:
        super().__init__(message)
        self.decision = decision


@dataclass(frozen=True)
class StateEvent:
    session: str
    state: str
    prev: str | None
    source: str
    rule: str | None
    why: str
    at: float  # wall clock

    def as_dict(self) -> dict[str, Any]:
        return {"type": "state", **asdict(self)}


@dataclass(frozen=True)
class AnswerResult:
    took: bool
    state: str
    rule: str | None
    waited: float
    keys: str


class Subscription:
    """A bounded mailbox of events; on overflow it is emptied and the consumer must
    resynchronise from a snapshot (``overflowed`` says so) instead of growing without bound."""

    def __init__(self, hub: EventHub, size: int) -> None:
        self._hub = hub
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(size)
        self.overflowed = False

    def put(self, event: dict[str, Any]) -> None:
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            self.overflowed = True
            while not self.queue.empty():
                self.queue.get_nowait()

    async def get(self) -> dict[str, Any]:
        return await self.queue.get()

    def close(self) -> None:
        self._hub.subscribers.discard(self)


class EventHub:
    """Fan-out of events (state changes, sessions created/deleted, notifications)."""

    def __init__(self) -> None:
        self.subscribers: set[Subscription] = set()

    def subscribe(self, size: int = 1000) -> Subscription:
        sub = Subscription(self, size)
        self.subscribers.add(sub)
        return sub

    def publish(self, event: dict[str, Any]) -> None:
        for sub in list(self.subscribers):
            sub.put(event)


def prompt_reacted(before: list[str], cursor_row: int, screen: Any) -> bool:
    """Whether the program answered a prompt: the cursor left the prompt's row, or another row
    changed, or the prompt's row no longer starts with what it showed (more than an echo)."""
    lines = screen.lines()
    row = screen.cursor.row
    if row != cursor_row or len(lines) != len(before):
        return True
    if any(old != new for i, (old, new) in enumerate(zip(before, lines)) if i != row):
        return True
    prompt = before[row] if 0 <= row < len(before) else ""
    return not lines[row].startswith(prompt) if prompt else lines[row] != prompt


class Runtime:
    """All sessions of one service."""

    def __init__(
        self,
        store: ManifestStore,
        *,
        sweep_ms: int = 700,
        mode: Mode = "sweep",
        settle_ms: int = 40,
        cap_ms: int = 150,
        change_bytes: int = 256,
        report_freshness: float = 60.0,
        notifier: Notifier | None = None,
        service_url: str = "",
        manifest_check_s: float = 1.0,
        backend: str = "pyte",
        transcripts: Path | str | None = None,
        transcript_max_bytes: int = 50 * 1024 * 1024,
    ) -> None:
        self.store = store
        self.transcripts = Path(transcripts) if transcripts else None
        self.transcript_max_bytes = transcript_max_bytes
        screen_class(backend)  # a backend that is not installed fails here, not at the first session
        self.backend = backend
        self.sweep_s = sweep_ms / 1000
        self.mode: Mode = mode
        self.events = EventHub()
        self.settle_s = settle_ms / 1000
        self.cap_s = cap_ms / 1000
        self.change_bytes = change_bytes
        self.freshness = report_freshness
        self.notifier = notifier or Notifier()
        self.notifier.subscribe(lambda n: self.events.publish({"type": "notification", **asdict(n)}))
        self.service_url = service_url
        self.manifest_check_s = manifest_check_s
        self.sessions: dict[str, Session] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self._feeding: list[Session] = []
        self._feed_scheduled = False
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._first_change: dict[str, float] = {}  # change mode: first unread big change
        self._first_small: dict[str, float] = {}  # change mode: first unread small change
        self._tasks: list[asyncio.Task[Any]] = []
        # figures for /metrics and the benchmark
        self.sweeps = 0
        self.sweep_seconds: list[float] = []
        self.classifications = 0
        self.transitions: dict[str, int] = {}
        self.sweep_seconds_sum = 0.0
        self.gone_bytes_read = 0  # of deleted sessions, so /metrics counters never go down
        self.gone_bytes_fed = 0

    # -- lifecycle -------------------------------------------------------------------------
    def clock(self) -> float:
        return self.loop.time() if self.loop else time.monotonic()

    @property
    def emulated_bytes(self) -> int:
        """Bytes fed to the screen emulators so far, deleted sessions included."""
        return self.gone_bytes_fed + sum(s.bytes_fed for s in self.sessions.values())

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._tasks.append(self.loop.create_task(self._sweep_loop()))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
        self._tasks.clear()
        await asyncio.gather(*(self._terminate(s) for s in list(self.sessions.values())))
        for s in list(self.sessions.values()):
            if s.proc:
                s.proc.close()
        await asyncio.gather(*(s.transcript.aclose() for s in self.sessions.values() if s.transcript))
        await self.notifier.aclose()

    # -- sessions --------------------------------------------------------------------------
    def create(self, spec: SessionSpec) -> Session:
        """Launch a session. A command that cannot start still gives a session, ``exited``
        with the error, so the caller can read what went wrong."""
        assert self.loop is not None, "Runtime.start() first"
        manifest = self.store.get(spec.agent) if spec.agent else None
        if spec.agent and manifest is None:
            raise SessionError(f"unknown agent {spec.agent!r} (known: {', '.join(self.store.agents())})")
        if spec.command:
            argv = list(spec.command)
        elif manifest is not None and manifest.manifest.command:
            argv = expand_command(manifest.manifest.command)
        else:
            raise SessionError("give a command, or an agent whose manifest has a launch command")
        if spec.cwd and not os.path.isdir(spec.cwd):
            raise SessionError(f"cwd {spec.cwd!r} is not a folder")
        if not (2 <= spec.rows <= 500 and 10 <= spec.cols <= 1000):
            raise SessionError("rows must be 2..500 and cols 10..1000")
        sid = secrets.token_hex(4)
        while sid in self.sessions:
            sid = secrets.token_hex(4)
        session = Session(sid, spec, argv, spec.agent, self.clock, backend=self.backend)
        extra = {
            **spec.env,
            "PANEWATCH_SESSION": sid,
            "PANEWATCH_REPORT_TOKEN": session.report_token,
            "PANEWATCH_URL": self.service_url,
        }
        env = child_env(os.environ, extra)
        if (spec.hooks and manifest is not None and manifest.manifest.hooks == "claude"
                and os.path.basename(argv[0]) in manifest.manifest.processes):
            argv.extend(["--settings", claude_settings()])
        self.sessions[sid] = session
        try:
            if resolve_program(argv, env) is None:
                raise SpawnError(f"cannot start {argv[0]!r}: not found or not executable")
            session.proc = PtyProcess(
                argv, rows=spec.rows, cols=spec.cols, cwd=session.cwd, env=env,
                on_output=lambda data, s=session: self._on_output(s, data),
                on_exit=lambda code, s=session: self._on_exit(s, code),
                loop=self.loop,
            )
        except SpawnError as exc:
            log.warning("could not start: %s", exc, extra={"session": sid})
            session.error = str(exc)
            session.exit_code = 127
            session.exited = True
            session.screen.feed(f"panewatch: {exc}\r\n".encode())
            self.events.publish({"type": "created", "session": session.info()})
            self._apply(session, session.classify(self.store, self.freshness))
            return session
        self._record(session)
        log.info("started %s (pid %s, agent %s)", argv[0], session.proc.pid, spec.agent or "-",
                 extra={"session": sid})
        session.sample_foreground()
        self.events.publish({"type": "created", "session": session.info()})
        self._apply(session, Decision("working", "start", os.path.basename(argv[0]), "starting"), force=True)
        return session

    def _record(self, session: Session) -> None:
        """Start the session's asciicast recording, when recordings are on."""
        if self.transcripts is None or self.loop is None:
            return
        session.transcript = Transcript(
            self.transcripts / f"{session.id}.cast", rows=session.screen.rows, cols=session.screen.cols,
            max_bytes=self.transcript_max_bytes, loop=self.loop, title=session.name, command=session.argv,
            session=session.id)
        session.output_listeners.append(session.transcript.output)

    def get(self, sid: str) -> Session:
        try:
            return self.sessions[sid]
        except KeyError:
            raise NotFound(f"no session {sid!r}") from None

    async def delete(self, sid: str) -> Session:
        session = self.get(sid)
        await self._terminate(session)
        if session.proc:
            session.proc.close()
        if session.transcript:
            await session.transcript.aclose()
        self.gone_bytes_read += session.bytes_read
        self.gone_bytes_fed += session.bytes_fed
        self.sessions.pop(sid, None)
        log.info("deleted (exit code %s)", session.exit_code, extra={"session": sid})
        timer = self._timers.pop(sid, None)
        if timer:
            timer.cancel()
        self._first_change.pop(sid, None)
        self._first_small.pop(sid, None)
        self.notifier.forget(sid)
        self.events.publish({"type": "deleted", "session": sid})
        return session

    async def _terminate(self, session: Session) -> None:
        if session.proc and session.proc.alive:
            await session.proc.terminate()

    def resize(self, sid: str, rows: int, cols: int) -> Session:
        if not (2 <= rows <= 500 and 10 <= cols <= 1000):
            raise SessionError("rows must be 2..500 and cols 10..1000")
        session = self.get(sid)
        session.feed_all()
        session.screen.resize(rows, cols)
        if session.transcript:
            session.transcript.resize(rows, cols)
        if session.proc and session.proc.alive:
            session.proc.resize(rows, cols)
        for notify in list(session.watchers):
            notify()
        return session

    # -- output and feeding ----------------------------------------------------------------
    def _on_output(self, session: Session, data: bytes) -> None:
        session.on_output(data)
        session.unread_bytes += len(data)
        if session not in self._feeding:
            self._feeding.append(session)
        if len(session.pending) > HIGH_WATER and session.proc:
            session.proc.pause_reading()
        self._schedule_feed()
        if self.mode == "change":
            self._schedule_change(session)

    def _schedule_feed(self) -> None:
        if not self._feed_scheduled and self.loop is not None:
            self._feed_scheduled = True
            self.loop.call_soon(self._feed_tick)

    def _feed_tick(self) -> None:
        """Feed every session a slice, round-robin, within a time budget per tick."""
        self._feed_scheduled = False
        start = time.perf_counter()
        while self._feeding and time.perf_counter() - start < TICK_BUDGET_S:
            for session in list(self._feeding):
                session.feed(FEED_BUDGET)
                if not session.pending:
                    self._feeding.remove(session)
                if len(session.pending) < LOW_WATER and session.proc and not session.exited:
                    session.proc.resume_reading()
                if time.perf_counter() - start >= TICK_BUDGET_S:
                    break
        if self._feeding:
            self._schedule_feed()

    # -- classification --------------------------------------------------------------------
    def _apply(self, session: Session, decision: Decision, force: bool = False) -> None:
        prev = session.set_decision(decision)
        if prev is None and not force:
            return
        prev_state = prev.state if prev else None
        event = StateEvent(session.id, decision.state, prev_state, decision.source, decision.rule,
                           decision.why, session.since)
        self.transitions[decision.source] = self.transitions.get(decision.source, 0) + 1
        log.info("state %s -> %s (%s %s)", prev_state, decision.state, decision.source, decision.rule,
                 extra={"session": session.id})
        payload = event.as_dict()
        if decision.state == "exited":
            payload.update(exit_code=session.exit_code, error=session.error)
        self.events.publish(payload)
        for notify in list(session.watchers):
            notify()
        if prev is not None:
            # leaving the launch placeholder is not the end of a turn
            self.notifier.on_transition(session=session.id, name=session.name,
                                        agent=session.manifest_agent or session.agent or "",
                                        prev=None if prev.source == "start" else prev_state,
                                        state=decision.state, source=decision.source,
                                        rule=decision.rule, why=decision.why)

    def classify(self, session: Session, *, fresh: bool = True, sample: bool = True) -> Decision:
        """Classify one session now (``fresh``: feed every pending byte first; ``sample``:
        re-read the foreground process, unless the caller just did)."""
        if fresh:
            session.feed_all()
        if sample:
            session.sample_foreground()
        self.classifications += 1
        session.unread_bytes = 0
        decision = session.classify(self.store, self.freshness)
        self._apply(session, decision)
        return decision

    def _maybe_classify(self, session: Session, now: float) -> None:
        if session.exited and session.decision.state == "exited":
            return
        session.sample_foreground()
        if not session.needs_classify(self.store, self.freshness):
            return
        # do not read a screen in the middle of a repaint, unless it has stalled there
        if (session.pending or session.screen.mid_frame) and now - session.last_output < 1.0:
            return
        self.classify(session, fresh=False, sample=False)

    async def _sweep_loop(self) -> None:
        next_manifest_check = 0.0
        interval = self.sweep_s if self.mode == "sweep" else max(self.sweep_s, 2.0)
        while True:
            await asyncio.sleep(interval)
            now = self.clock()
            t0 = time.perf_counter()
            if now >= next_manifest_check:
                for err in self.store.reload_if_changed():
                    log.warning("manifest refused, previous version kept: %s", err)
                    for s in self.sessions.values():  # say it where it matters: in each affected pane's log
                        if s.manifest_agent == err.path.stem or s.agent == err.path.stem:
                            log.warning("its manifest %s was refused; the previous version stays in use",
                                        err.path.name, extra={"session": s.id})
                next_manifest_check = now + self.manifest_check_s
            for session in list(self.sessions.values()):
                self._maybe_classify(session, now)
            self.sweeps += 1
            self.sweep_seconds.append(time.perf_counter() - t0)
            self.sweep_seconds_sum += self.sweep_seconds[-1]
            if len(self.sweep_seconds) > 2048:
                del self.sweep_seconds[:1024]

    def _schedule_change(self, session: Session) -> None:
        """Change-driven mode: read the screen once output pauses (``settle_s``), but no later
        than ``cap_s`` after the change — when at least ``change_bytes`` arrived since the last
        read. Less than that (a spinner frame, a clock tick) waits up to the sweep interval: a
        dialog is a repaint of hundreds of bytes, and reading the screen after every 60-byte
        spinner frame costs ten reads a second per agent for nothing."""
        now = self.clock()
        if self._hot(session, now):
            first = self._first_change.setdefault(session.id, now)
            due = min(now + self.settle_s, first + self.cap_s)
        else:
            due = self._first_small.setdefault(session.id, now) + self.sweep_s
        timer = self._timers.get(session.id)
        if timer is not None:
            if timer.when() <= due:
                return
            timer.cancel()
        assert self.loop is not None
        self._timers[session.id] = self.loop.call_at(due, self._change_due, session)

    def _hot(self, session: Session, now: float) -> bool:
        """Enough output to read at once, or the tail of a repaint that was just read."""
        return session.unread_bytes >= self.change_bytes or now < session.hot_until

    def _change_due(self, session: Session) -> None:
        self._timers.pop(session.id, None)
        if session.id not in self.sessions:
            return
        now = self.clock()
        if self._hot(session, now):
            first = self._first_change.get(session.id, now)
            quiet = now - session.last_output >= self.settle_s - 1e-3
            if not quiet and now - first < self.cap_s:
                self._schedule_change(session)
                return
            if session.unread_bytes >= self.change_bytes:
                # the tail of a big repaint, split over reads, is read promptly too
                session.hot_until = now + 2 * self.settle_s
        self._first_change.pop(session.id, None)
        self._first_small.pop(session.id, None)
        if session.pending:
            session.feed_all()
        session.sample_foreground()
        if session.needs_classify(self.store, self.freshness):
            self.classify(session, fresh=False, sample=False)
        session.unread_bytes = 0

    def _on_exit(self, session: Session, code: int) -> None:
        session.exit_code = code
        session.exited = True
        session.feed_all()
        log.info("exited with %s", code, extra={"session": session.id})
        decision = session.classify(self.store, self.freshness)
        self._apply(session, decision)

    # -- signals from outside ----------------------------------------------------------------
    def report(self, sid: str, payload: dict[str, Any]) -> Report | None:
        """A hook payload or ``{"state": ...}`` for a session; applied at once."""
        session = self.get(sid)
        state, event, detail = state_from_payload(payload)
        if state is None:
            return None
        now = self.clock()
        if event == "PermissionRequest":
            session.permission_requested_at = now
        elif (state == "blocked" and event.startswith("Notification:") and session.permission_requested_at is not None
              and now - session.permission_requested_at < REDUNDANT_NOTIFICATION_S):
            # Claude repeats a prompt ~6 s later as a permission Notification; when the prompt
            # was already reported, that repeat can only arrive late (after an answer) and lie
            return None
        report = Report(state, event, now, detail)
        session.report = report
        session.report_gen += 1
        if not session.exited:
            self.classify(session, fresh=True)
        return report

    # -- guarded writes --------------------------------------------------------------------
    def _writable(self, session: Session) -> PtyProcess:
        if session.proc is None or not session.proc.alive:
            raise Conflict("the session has exited", session.decision)
        return session.proc

    async def send(self, sid: str, text: str, *, enter: bool = True) -> Decision:
        """Type ``text`` (and Enter) — refused when the pane is blocked at this moment."""
        session = self.get(sid)
        decision = self.classify(session)
        if decision.state == "blocked":
            raise Conflict(f"the pane is blocked ({decision.rule}: {decision.why}); answer it instead",
                           decision)
        proc = self._writable(session)
        data = text.replace("\n", "\r")
        if session.screen.mode(2004) and ("\n" in text or len(text) > 1):
            proc.write(b"\x1b[200~" + text.encode() + b"\x1b[201~")
        elif data:
            proc.write(data.encode())
        if enter:
            # a TUI that reads "text\r" in one chunk takes it for a paste; give it a beat
            await asyncio.sleep(0.08)
            self._writable(session).write(b"\r")
        return decision

    async def answer(self, sid: str, *, option: int | None = None, keys: str | None = None,
                     settle: float = 0.2, deadline: float = 3.0) -> AnswerResult:
        """Answer a prompt: only when blocked now; then check that the prompt went away."""
        if (option is None) == (keys is None):
            raise SessionError("give exactly one of option or keys")
        session = self.get(sid)
        decision = self.classify(session)
        if decision.state != "blocked":
            raise Conflict(f"the pane is not blocked (it is {decision.state}); nothing to answer", decision)
        proc = self._writable(session)
        # a key sent while the prompt is still being drawn can be dropped: wait for quiet
        limit = self.clock() + 1.0
        while self.clock() - session.last_output < settle and self.clock() < limit:
            await asyncio.sleep(0.03)
        decision = self.classify(session)
        if decision.state != "blocked":
            raise Conflict(f"the prompt went away before the answer (now {decision.state})", decision)
        if option is not None:
            manifest = session.manifest(self.store)
            template = manifest.manifest.option_keys if manifest else "{n}"
            data = template.replace("{n}", str(option))
        else:
            data = keys or ""
        before = (session.screen.lines(), session.screen.cursor.row)
        proc.write(data.encode())
        start = self.clock()
        took = False
        while self.clock() - start < deadline:
            await asyncio.sleep(0.05)
            decision = self.classify(session)
            # the rule no longer matching is not enough: an echo ("^[" after "[y/N] ") breaks it
            # while the program still waits; the agent must have reacted
            if decision.state != "blocked" and prompt_reacted(*before, session.screen):
                took = True
                break
        return AnswerResult(took, decision.state, decision.rule, round(self.clock() - start, 3), data)

    # -- views -----------------------------------------------------------------------------
    def snapshot(self) -> list[dict[str, Any]]:
        return [s.info() for s in self.sessions.values()]
