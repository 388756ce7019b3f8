"""The private tmux server: its life, spawning and adopting panes, and what it tells about them."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shutil
import signal as signals
import subprocess
from pathlib import Path

from ...access.statedir import StateDirError, check_private, prepare_state_dir
from ...procs.proctree import CGROUP_ROOT as CGROUP_MOUNT
from ...procs.proctree import Cgroups
from ...procs.sandbox import Sandbox, Uncontainable
from ..base import HostKind, LaunchRefused, LaunchSpec, PaneSink, SpawnError
from ._control import ControlClient, Reply
from ._kill import cgroup_name, folder_tag, kill_tree, make_cgroup, pane_marker, write_launch
from ._pane import TmuxPane
from ._protocol import (
    CONTROL_SESSION,
    EARLY_BYTES,
    EARLY_PANES,
    INFO_FORMAT,
    LAUNCH_DIR,
    OPT_CGROUP,
    OPT_CONTAINED,
    OPT_SESSION,
    PAUSE_AFTER_S,
    PaneInfo,
    TmuxError,
    _argv_arg,
    _exit_reason,
    quote,
    run_tmux,
    server_env,
    socket_path,
    tmux_usable,
)

log = logging.getLogger("panewatch.hosts.tmux")

# --- the host -----------------------------------------------------------------------------


class TmuxHost:
    """Panes in a private tmux server on ``<state_dir>/tmux.sock``; they survive the server."""

    kind = HostKind.tmux
    survives_restart = True

    def __init__(
        self,
        state_dir: Path | str,
        *,
        tmux: str = "tmux",
        pause_after: int = PAUSE_AFTER_S,
        sandbox: Sandbox | None = None,
        cgroups: bool = True,
    ) -> None:
        self.state_dir = Path(state_dir)
        self.folder_tag = folder_tag(self.state_dir)
        self.sandbox = sandbox
        self._want_cgroups = cgroups
        self.cgroups: Cgroups | None = None  # found at start: a cgroup per pane where one can be made
        self.socket = socket_path(self.state_dir)
        self.tmux = shutil.which(tmux) or tmux
        self.env_path = shutil.which("env") or "/usr/bin/env"
        self.pause_after = pause_after
        self.control: ControlClient | None = None
        self.panes: dict[str, TmuxPane] = {}  # by tmux pane id
        self._starting = 0  # spawns whose tmux invocation runs (in a worker thread)
        self._early: dict[str, bytearray] = {}  # their panes' output, seen before they are known
        self._loop: asyncio.AbstractEventLoop | None = None
        self._buffers = 0
        self._stopping = False
        self.server_pid: int | None = None
        self.pauses = 0  # panes tmux paused because this server read them too late
        self._reconnecting: asyncio.Task[None] | None = None
        self._panes_snapshot: tuple[float, asyncio.Task[dict[str, PaneInfo]]] | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None, "TmuxHost.start() first"
        return self._loop

    # -- tmux invocations ----------------------------------------------------------------
    def _run(self, *args: str, timeout: float = 10.0) -> subprocess.CompletedProcess[str]:
        """One tmux client invocation (start-up, spawn, cleanup: never per sweep)."""
        return run_tmux(self.tmux, self.socket, *args, timeout=timeout)

    def _send(self, line: str, reply: Reply | None = None) -> None:
        if self.control is None or self.control.closed:
            if reply:
                reply(None, "the tmux control client is gone")
            return
        self.control.send(line, reply)

    def _nudge(self) -> None:
        if self.server_pid:
            try:
                os.kill(self.server_pid, signals.SIGCHLD)
            except OSError:
                pass

    def _buffer_name(self) -> str:
        self._buffers += 1
        return f"panewatch-{os.getpid()}-{self._buffers}"

    # -- lifecycle -----------------------------------------------------------------------
    def check_ready(self) -> None:
        """A usable tmux, a private state folder, a socket that is ours (one-line errors)."""
        reason = tmux_usable(self.tmux)
        if reason:
            raise TmuxError(reason)
        try:
            prepare_state_dir(self.state_dir)
            check_private(self.socket, "tmux socket")
        except StateDirError as exc:
            raise TmuxError(str(exc)) from None
        if len(os.fsencode(self.socket)) >= 104:
            raise TmuxError(
                f"the state folder path is too long for a socket ({self.socket}); use a shorter --state-dir"
            )

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await asyncio.to_thread(self.check_ready)  # runs tmux -V: never on the loop
        if self.sandbox is not None:
            await self.sandbox.start()
        if self._want_cgroups:
            self.cgroups = await asyncio.to_thread(Cgroups.detect)
        await asyncio.to_thread(self._clear_leftovers)
        await self._ensure_server()
        await self._connect()

    def _clear_leftovers(self) -> None:
        """Launch scripts a killed server left (written, never run: they hold an environment), and
        this folder's pane cgroups that nothing runs in any more (rmdir fails on a live one)."""
        for left in (self.state_dir / LAUNCH_DIR).glob("*.sh"):
            left.unlink(missing_ok=True)
        if self.cgroups is not None:
            for cgroup in self.cgroups.base.glob(cgroup_name(self.state_dir, "*")):
                Cgroups.remove(cgroup)

    def _cgroup_of(self, pane: TmuxPane) -> tuple[Cgroups, Path] | None:
        if pane.cgroup is None or self.cgroups is None:
            return None
        return self.cgroups, pane.cgroup

    def _trusted_cgroup(self, session: str, recorded: str) -> Path | None:
        """The cgroup a window option names, if it is one of ours for this session (a server
        whose own cgroup moved still finds its panes'); else the one this server would make."""
        if self.cgroups is None:
            return None
        name = cgroup_name(self.state_dir, session)
        for path in (Path(recorded) if recorded else None, self.cgroups.base / name):
            ours = path is not None and path.name == name and path.parent.name == "panewatch"
            if ours and path is not None and path.is_relative_to(CGROUP_MOUNT) and path.is_dir():
                return path
        return None

    async def _ensure_server(self) -> None:
        proc = await asyncio.to_thread(self._run, "has-session", "-t", f"={CONTROL_SESSION}")
        if proc.returncode != 0:
            # "cat" keeps the hidden session alive, reading a terminal nobody types into
            proc = await asyncio.to_thread(
                self._run,
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-s",
                CONTROL_SESSION,
                "-n",
                "_control",
                "-x",
                "80",
                "-y",
                "24",
                "cat",
            )
            if proc.returncode != 0 and "duplicate session" not in proc.stderr:
                raise TmuxError(f"cannot start tmux on {self.socket}: {proc.stderr.strip() or proc.stdout.strip()}")
        if self.socket.stat().st_mode & 0o077:  # tmux makes it 0600 (+x while attached)
            os.chmod(self.socket, 0o600)
        # remain-on-exit keeps a dead pane's status and screen; window-size stays the default
        # globally (tmux 3.3a crashes creating windows under a global "manual") and is set to
        # manual per window so an attached terminal never resizes an agent
        opts = [
            ("set-option", "-g", "exit-empty", "off"),
            ("set-option", "-gw", "remain-on-exit", "on"),
            ("set-option", "-gw", "automatic-rename", "off"),
            ("set-option", "-gw", "allow-rename", "off"),
            ("set-option", "-g", "destroy-unattached", "off"),
            ("set-option", "-s", "escape-time", "10"),
            ("set-option", "-g", "history-limit", "1000"),
            ("set-option", "-gw", "aggressive-resize", "off"),
        ]
        args: list[str] = []
        for opt in opts:
            args.extend([*opt, ";"])
        proc = await asyncio.to_thread(self._run, *args[:-1])
        if proc.returncode != 0:
            raise TmuxError(f"tmux on {self.socket} refused its options: {proc.stderr.strip()}")

    async def _connect(self) -> None:
        self.control = ControlClient(
            [self.tmux, "-u", "-S", str(self.socket), "-C", "attach-session", "-t", f"={CONTROL_SESSION}"],
            server_env(),
            on_output=self._on_output,
            on_notice=self._on_notice,
            on_close=self._on_close,
        )
        await self.control.start()
        # flow control: a pane more than pause_after seconds behind is paused, not queued forever
        await self.control.command(f"refresh-client -f pause-after={self.pause_after}")
        lines = await self.control.command("display-message -p '#{pid}'")
        self.server_pid = int(lines[0]) if lines and lines[0].isdigit() else None

    async def stop(self) -> None:
        """Detach the control client; the tmux server and every agent keep running."""
        self._stopping = True
        if self._reconnecting is not None:
            self._reconnecting.cancel()
        for pane in list(self.panes.values()):
            pane._unwatch()
        if self.control is not None:
            await self.control.stop()
        self.panes.clear()

    async def kill_server(self) -> None:
        """End the tmux server and every agent in it (tests, and a user's explicit reset)."""
        await asyncio.to_thread(self._run, "kill-server")

    # -- notifications -------------------------------------------------------------------
    def _on_output(self, pane_id: str, data: bytes) -> None:
        pane = self.panes.get(pane_id)
        if pane is not None:
            pane._output(data)
        elif self._starting and len(self._early) < EARLY_PANES:  # a pane ``spawn`` has not seen yet
            early = self._early.setdefault(pane_id, bytearray())
            if len(early) < EARLY_BYTES:
                early += data

    def _on_notice(self, name: str, args: list[str]) -> None:
        if name == "%pause" and args:
            self.pauses += 1
            pane = self.panes.get(args[0])
            self._send(f"refresh-client -A {quote(args[0] + ':continue')}")
            if pane is not None:
                log.info(
                    "tmux paused the pane's output (reading %s s behind); catching up from its screen",
                    self.pause_after,
                    extra={"session": pane.session},
                )
                pane._reseed()
        elif name in ("%window-close", "%unlinked-window-close") and args:
            for pane in list(self.panes.values()):
                if pane.window_id == args[0] and not pane.exited:
                    pane._reap()
        elif name == "%exit":
            pass  # followed by EOF, handled in _on_close

    def _on_close(self) -> None:
        if self._stopping:
            return
        log.warning("the tmux server on %s is gone; its sessions are lost", self.socket)
        for pane in list(self.panes.values()):
            self._lost(pane, None, "the tmux server is gone")
        self.panes.clear()
        self._reconnecting = self.loop.create_task(self._reconnect())

    async def ensure_running(self) -> None:
        """A tmux server and control client up now (after the server was killed), or TmuxError."""
        if self._reconnecting is not None and not self._reconnecting.done():
            await asyncio.shield(self._reconnecting)
        if self.control is not None and not self.control.closed:
            return
        await self._ensure_server()
        await self._connect()

    async def _reconnect(self) -> None:
        """A fresh tmux server for the sessions started (or resumed) from now on."""
        for delay in (0.1, 0.5, 2.0, 5.0):
            await asyncio.sleep(delay)
            if self._stopping or (self.control is not None and not self.control.closed):
                return
            try:
                await self._ensure_server()
                await self._connect()
                log.info("a new tmux server runs on %s", self.socket)
                return
            except (TmuxError, OSError) as exc:
                log.warning("could not start a new tmux server on %s: %s", self.socket, exc)

    def _lost(self, pane: TmuxPane, code: int | None, reason: str) -> None:
        if pane.exited:
            return
        pane._unwatch()
        pane.exited = True
        pane.returncode = code
        if pane.cgroup is not None and Cgroups.remove(pane.cgroup):  # empty: nothing left to kill
            pane.cgroup = None  # (a daemon it left keeps it, for the DELETE to kill)
        pane.sink.on_exit(code, reason)

    def _forget(self, pane: TmuxPane) -> None:
        if self.panes.get(pane.pane_id) is pane:
            del self.panes[pane.pane_id]

    async def _info(self, target: str) -> PaneInfo | None:
        """The pane's info, None when it is gone (``display`` falls back to another pane, so
        the answer's id is checked)."""
        if self.control is None or self.control.closed:
            return None
        try:
            lines = await self.control.command(f"display-message -p -t {target} {quote(INFO_FORMAT)}")
        except TmuxError:
            return None
        info = PaneInfo.parse(lines[0]) if lines else None
        return info if info is not None and info.pane_id == target else None

    async def _kill_window(self, pane: TmuxPane) -> None:
        if self.control is None or self.control.closed:
            return
        try:
            await self.control.command(f"kill-window -t {pane.window_id}")
        except TmuxError:
            pass  # already gone
        try:
            await self.control.command(f"kill-session -t {quote('=' + pane.session)}")
        except TmuxError:
            pass

    # -- panes ---------------------------------------------------------------------------
    def _spawn_args(self, spec: LaunchSpec) -> tuple[list[str], bool, Path | None, Path]:
        """The one tmux invocation that creates the agent's session and window and links it to
        the control session, whether the agent is contained, its cgroup and launch script;
        ``SpawnError`` for what cannot start. Run in a worker (it writes the launch file)."""
        argv = list(spec.argv)
        if not argv:
            raise SpawnError("empty command")
        if not os.path.isdir(spec.cwd):
            raise SpawnError(f"cannot start {argv[0]!r}: folder {spec.cwd!r} does not exist")
        if shutil.which(argv[0], path=spec.env.get("PATH", os.defpath)) is None and not os.access(argv[0], os.X_OK):
            raise SpawnError(f"cannot start {argv[0]!r}: not found or not executable")
        contained = self.sandbox is not None and self.sandbox.active
        if self.sandbox is not None:
            try:
                argv = self.sandbox.wrap(argv, spec.env)
            except Uncontainable as exc:
                raise LaunchRefused(str(exc)) from None
        name = spec.session
        cgroup = make_cgroup(self.cgroups, self.state_dir, name)
        try:
            script = write_launch(
                self.state_dir / LAUNCH_DIR, pane_marker(self.folder_tag, name), self.env_path, spec, argv, cgroup
            )
        except OSError as exc:
            self._drop_cgroup(cgroup)
            raise SpawnError(f"cannot start {spec.argv[0]!r}: cannot write its launch file ({exc.strerror})") from None
        target = f"={name}:"
        options = [(OPT_SESSION, name)]
        if contained:
            options.append((OPT_CONTAINED, "1"))
        if cgroup is not None:
            options.append((OPT_CGROUP, str(cgroup)))
        args = [
            *("set-option", "-g", "default-size", f"{spec.cols}x{spec.rows}", ";"),
            *("new-session", "-d", "-s", name, "-n", name, "-c", spec.cwd.replace("#", "##")),
            *("-P", "-F", "#{pane_id} #{pane_pid} #{window_id} #{pane_tty}"),
            *("/bin/sh", _argv_arg(str(script))),
            *(";", "set-option", "-w", "-t", target, "window-size", "manual"),
        ]
        for option, value in options:
            args += [";", "set-option", "-w", "-t", target, option, _argv_arg(value)]
        args += [";", "link-window", "-d", "-s", target, "-t", f"={CONTROL_SESSION}:"]
        return args, contained, cgroup, script

    async def spawn(self, spec: LaunchSpec, sink: PaneSink) -> TmuxPane:
        """One tmux invocation, in a worker thread, creates the agent's session and window and
        links it to the control session atomically: a failure leaves nothing behind (no window,
        no launch script, no cgroup). Output the control client sees before the pane is known
        here is held for it, in order."""
        try:
            await self.ensure_running()  # after the server was killed: a new one for this agent
        except TmuxError as exc:
            raise SpawnError(f"the tmux server is not running: {exc}") from None
        args, contained, cgroup, script = await asyncio.to_thread(self._spawn_args, spec)
        self._starting += 1
        try:
            proc = await asyncio.to_thread(self._run, *args)
        finally:
            self._starting -= 1
        found = re.match(r"(%\d+) (\d+) (@\d+) (\S+)", proc.stdout.strip())
        if proc.returncode != 0 or not found:
            if found:  # created but not linked: take it away again
                await asyncio.to_thread(self._run, "kill-window", "-t", found.group(3))
            self._early.pop(found.group(1) if found else "", None)
            script.unlink(missing_ok=True)
            self._drop_cgroup(cgroup)
            raise SpawnError(f"cannot start {spec.argv[0]!r} in tmux: {proc.stderr.strip() or 'no pane'}")
        pane = TmuxPane(self, spec.session, found.group(1), found.group(3), int(found.group(2)), sink)
        pane.tty = found.group(4)
        pane.contained, pane.cgroup = contained, cgroup
        self.panes[pane.pane_id] = pane
        pane.hold(self._early.pop(pane.pane_id, b""))  # delivered once the engine has its handle
        pane.watch()
        return pane

    @staticmethod
    def _drop_cgroup(cgroup: Path | None) -> None:
        if cgroup is not None:
            Cgroups.remove(cgroup)

    async def adopt(self, ref: str, session: str, sink: PaneSink) -> TmuxPane | None:
        """Take over a pane a previous server started: seed its screen, then stream it.

        None when the pane is gone, or when its id now names another session's pane (tmux
        reuses pane ids after its own restart)."""
        if self.control is None or self.control.closed or not re.fullmatch(r"%\d+", ref):
            return None
        info = (await self._all_panes()).get(ref)
        if info is None or info.session != session:
            return None
        pane = TmuxPane(self, session, info.pane_id, info.window_id, info.pid, sink)
        pane.tty = info.tty
        pane.contained, pane.cgroup = info.contained, self._trusted_cgroup(session, info.cgroup)
        self.panes[pane.pane_id] = pane
        seeded: asyncio.Future[PaneInfo] = self.loop.create_future()
        pane.seed(info, lambda i: None if seeded.done() else seeded.set_result(i))
        info = await seeded
        if info.dead or info.exit_code is not None:
            code = info.exit_code
            self._lost(pane, code, _exit_reason(code))
        else:
            pane.watch()
        return pane

    async def _all_panes(self) -> dict[str, PaneInfo]:
        """Every pane's info from one ``list-panes -a``, shared by the adoptions of a start-up
        (100 panes: one command, not 100)."""
        now = self.loop.time()
        if self._panes_snapshot is None or now - self._panes_snapshot[0] > 1.0:

            async def fetch() -> dict[str, PaneInfo]:
                assert self.control is not None
                try:
                    lines = await self.control.command(f"list-panes -a -F {quote(INFO_FORMAT)}")
                except TmuxError:
                    return {}
                found = (PaneInfo.parse(line) for line in lines)
                return {i.pane_id: i for i in found if i is not None}

            self._panes_snapshot = (now, self.loop.create_task(fetch()))
        return await asyncio.shield(self._panes_snapshot[1])

    async def remove_orphans(self, keep: set[str]) -> list[str]:
        """End agent windows no registry session names (a server killed between starting an agent
        and recording it); windows a user opened by hand carry no Panewatch id and stay."""
        gone = []
        for session, ref in (await self.list_sessions()).items():
            if session not in keep:
                info = (await self._all_panes()).get(ref)
                if info is not None:
                    cgroup = self._trusted_cgroup(session, info.cgroup)
                    root = info.pid if info.pid and not info.dead else None
                    await asyncio.to_thread(
                        kill_tree,
                        session,
                        pane_marker(self.folder_tag, session),
                        root,
                        (self.cgroups, cgroup) if cgroup and self.cgroups else None,
                    )
                    try:
                        await self.control.command(f"kill-window -t {info.window_id}")  # type: ignore[union-attr]
                    except TmuxError:
                        pass
                    gone.append(session)
        return gone

    async def list_sessions(self) -> dict[str, str]:
        """Panewatch session id → pane ref of every agent window in this tmux server."""
        if self.control is None or self.control.closed:
            return {}
        try:
            lines = await self.control.command(f"list-panes -a -F {quote('#{pane_id} #{' + OPT_SESSION + '}')}")
        except TmuxError:
            return {}
        out: dict[str, str] = {}
        for line in lines:
            ref, _, session = line.decode("utf-8", "replace").partition(" ")
            if session:
                out[session] = ref
        return out
