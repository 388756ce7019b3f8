"""A child process in a pseudo-terminal, driven from the asyncio event loop.

Output is read with the loop's reader callbacks (never a thread, never a blocking read);
writes go out non-blocking with the rest queued behind a writer callback; the child's exit is
seen through a pidfd, not through EOF on the master: a grandchild that ignores SIGHUP keeps
the terminal open long after the agent itself is gone. With a ``Reaper`` every process the child
starts is contained (``proctree``) and killed with it on terminate/close, whatever it did to
leave the terminal's process group.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import signal
import struct
import subprocess
import termios
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .outbox import Outbox
from .proctree import Containment, Reaper, exits_within, join_cgroup, release_pidfd, signal_groups
from .sandbox import agent_in_sandbox

READ_SIZE = 65536
#: Most bytes queued for a child that is not reading its input before writes are refused.
WRITE_QUEUE_LIMIT = 1 << 20
#: Longest single argument or ``NAME=value`` the kernel takes (32 pages).
MAX_ARG_STRLEN = 32 * 4096
#: Room left under ``ARG_MAX`` for what goes in front of the command (wrappers, bwrap's words, the
#: server's own environment for tmux's launch script).
EXEC_HEADROOM = 64 * 1024


class SpawnError(Exception):
    """The command could not be started (not found, not executable, bad folder)."""


class WriteRefused(Exception):
    """The child is not reading its terminal and too much input is already queued."""


def _set_size(fd: int, rows: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def _take_terminal() -> None:  # runs in the child between fork and exec
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


#: Signals an ignoring parent would pass on through exec (a server started with ``&`` from a
#: script ignores SIGINT and SIGQUIT; ``nohup``, SIGHUP): a pane gets them as a terminal would.
_DEFAULT_SIGNALS = (
    signal.SIGINT,
    signal.SIGQUIT,
    signal.SIGHUP,
    signal.SIGTERM,
    signal.SIGTSTP,
    signal.SIGTTIN,
    signal.SIGTTOU,
)


def _child_setup(cgroup: Path | None) -> Callable[[], None]:
    def setup() -> None:  # in the child between fork and exec: join the cgroup first, then the terminal
        if cgroup is not None:
            join_cgroup(cgroup)
        for sig in _DEFAULT_SIGNALS:  # else Ctrl-C in the pane would do nothing
            signal.signal(sig, signal.SIG_DFL)
        _take_terminal()

    return setup


def unencodable(argv: Sequence[str], cwd: str | None, env: Mapping[str, str] | None) -> str | None:
    """Why the OS cannot take these strings (NUL, lone surrogates, '=' in a name), or None."""

    def bad(text: str) -> bool:
        if "\x00" in text:
            return True
        try:
            os.fsencode(text)
        except UnicodeError:
            return True
        return False

    if any(bad(a) for a in argv):
        return "an argument has a NUL or a character the OS cannot encode"
    if cwd is not None and bad(cwd):
        return "the folder has a NUL or a character the OS cannot encode"
    for key, value in (env or {}).items():
        if bad(key) or bad(value) or "=" in key or not key:
            return f"environment variable {key[:40]!r}: bad name or value"
    return too_long(argv, env)


def too_long(argv: Sequence[str], env: Mapping[str, str] | None) -> str | None:
    """Why ``execve`` would refuse these strings (E2BIG), said before anything starts: one string
    of at most ``MAX_ARG_STRLEN``, all of them (with room for the wrappers and the sandbox in
    front) within ``ARG_MAX``."""
    words = [os.fsencode(a) for a in argv] + [os.fsencode(f"{k}={v}") for k, v in (env or {}).items()]
    longest = max((len(w) for w in words), default=0)
    if longest >= MAX_ARG_STRLEN:
        return f"an argument or variable is {longest} bytes; the OS takes at most {MAX_ARG_STRLEN - 1} in one"
    total = sum(len(w) + 1 + 8 for w in words)  # the string, its NUL, its pointer
    limit = os.sysconf("SC_ARG_MAX") - EXEC_HEADROOM
    if total > limit:
        return f"the command and its environment are {total} bytes; the OS takes at most {limit} here"
    return None


def _popen(
    argv: Sequence[str], slave: int, cwd: str | None, env: Mapping[str, str] | None, cgroup: Path | None
) -> subprocess.Popen[bytes]:
    """The child on the pty's slave side, in a session of its own (and its cgroup, if any)."""
    try:
        return subprocess.Popen(
            list(argv),
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            start_new_session=True,
            preexec_fn=_child_setup(cgroup),
            close_fds=True,
        )
    except (OSError, ValueError, UnicodeError, subprocess.SubprocessError) as exc:
        raise SpawnError(f"cannot start {str(argv[0])[:80]!r}: {getattr(exc, 'strerror', None) or exc}") from None


@dataclass(frozen=True)
class Child:
    """A started child, not yet watched: its process, the PTY master, its containment."""

    proc: subprocess.Popen[bytes]
    master: int
    containment: Containment | None


def start_child(
    argv: Sequence[str],
    *,
    rows: int,
    cols: int,
    cwd: str | None,
    env: Mapping[str, str] | None,
    reaper: Reaper | None,
    session: str | None,
) -> Child:
    """Open the PTY, contain and start the child: the blocking part of a spawn (fork, exec, the
    cgroup's files), which ``PtyProcess.open`` runs in a worker thread."""
    why = unencodable(argv, cwd, env)
    if why is not None:
        raise SpawnError(f"cannot start {str(argv[0])[:80]!r}: {why}")
    containment = reaper.contain(session or "pane") if reaper else None
    if containment is not None:
        env = {**(env if env is not None else os.environ), **containment.env}
    master, slave = os.openpty()
    try:
        _set_size(master, rows, cols)
        proc = _popen(argv, slave, cwd, env, containment.cgroup if containment else None)
    except BaseException:
        os.close(master)
        if containment is not None and reaper is not None:
            reaper.release(containment)
        raise
    finally:
        os.close(slave)
    if containment is not None and reaper is not None:
        reaper.started(containment, proc.pid)
    return Child(proc, master, containment)


class PtyProcess:
    """One child in its own session with the PTY slave as its controlling terminal.

    ``on_output(bytes)`` is called from the loop for every chunk read; ``on_exit(code)`` once,
    when the child itself has exited and been reaped (negative code: killed by that signal).
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        rows: int = 32,
        cols: int = 120,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        on_output: Callable[[bytes], None],
        on_exit: Callable[[int], None],
        loop: asyncio.AbstractEventLoop | None = None,
        reaper: Reaper | None = None,
        session: str | None = None,
        contained: bool = False,
        child: Child | None = None,
    ) -> None:
        self.loop = loop or asyncio.get_running_loop()
        self.contained = contained  # argv starts a sandbox (``panewatch.procs.sandbox``), the agent inside it
        self._agent_pid: int | None = None
        if child is None:  # ``open`` starts it in a worker; here, on the caller's thread
            child = start_child(argv, rows=rows, cols=cols, cwd=cwd, env=env, reaper=reaper, session=session)
        self._reaper = reaper
        self._tree_killed = False
        self.containment: Containment | None = child.containment
        self._on_output = on_output
        self._on_exit = on_exit
        self.returncode: int | None = None
        self._reading = False
        self._master_open = False
        self._proc = child.proc
        self.pid = self._proc.pid
        master = child.master
        self.master = master
        self._master_open = True
        self._outbox = Outbox(self.loop, master, WRITE_QUEUE_LIMIT)  # EIO: the child is gone; dropped
        os.set_blocking(master, False)
        self._pidfd = os.pidfd_open(self.pid)
        self.loop.add_reader(self._pidfd, self._on_pidfd)
        self.resume_reading()

    # -- reading ---------------------------------------------------------------------------
    def pause_reading(self) -> None:
        """Stop reading: the child blocks once the PTY buffer is full (used under floods)."""
        if self._reading:
            self.loop.remove_reader(self.master)
            self._reading = False

    def resume_reading(self) -> None:
        if not self._reading and self._master_open:
            self.loop.add_reader(self.master, self._on_readable)
            self._reading = True

    def _on_readable(self) -> None:
        try:
            data = os.read(self.master, READ_SIZE)
        except BlockingIOError:
            return
        except OSError:  # EIO: every slave fd is closed
            data = b""
        if not data:
            self.pause_reading()
            return
        self._on_output(data)

    # -- exit ------------------------------------------------------------------------------
    def _on_pidfd(self) -> None:
        code = self._proc.poll()
        if code is None:
            return
        self._pidfd = release_pidfd(self.loop, self._pidfd, self._proc)  # exited: nothing to reap
        self.returncode = code
        # drain what the child wrote just before exiting, then report
        if self._reading:
            for _ in range(64):
                try:
                    data = os.read(self.master, READ_SIZE)
                except OSError:
                    break
                if not data:
                    break
                self._on_output(data)
        self._on_exit(code)

    @property
    def alive(self) -> bool:
        return self.returncode is None

    @property
    def agent_pid(self) -> int | None:
        """The child itself, or in a sandbox the agent inside it once it runs (found once, then kept:
        its pid does not change for as long as it lives)."""
        if not self.contained:
            return self.pid
        if self._agent_pid is None and self.alive:
            self._agent_pid = agent_in_sandbox(self.pid)
        return self._agent_pid

    # -- writing ---------------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        """Write without blocking; what does not fit now is queued behind a writer callback."""
        if not self._master_open or not self.alive:
            raise WriteRefused("the process has exited")
        if not self._outbox.fits(len(data)):
            raise WriteRefused(f"the process is not reading its input ({self._outbox.queued} bytes queued)")
        self._outbox.send(data)

    # -- control ---------------------------------------------------------------------------
    def resize(self, rows: int, cols: int) -> None:
        """Set the terminal size; the kernel sends SIGWINCH to the foreground process group."""
        if self._master_open:
            _set_size(self.master, rows, cols)

    def foreground_pgid(self) -> int | None:
        """The terminal's foreground process group (``tcgetpgrp`` on the master); None while a
        sandbox's own group still holds it (the agent takes it a moment after bwrap starts)."""
        if not self._master_open:
            return None
        try:
            pgid = os.tcgetpgrp(self.master)
        except OSError:
            return None
        return None if self.contained and pgid == self.pid else pgid

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the child's process group and to the terminal's foreground group. In a
        sandbox the agent's group stands for the child's: bwrap dies of a SIGHUP, and its death
        would SIGKILL the agent before it could end on its own."""
        signal_groups(self.agent_pid or self.pid, self.foreground_pgid(), sig)

    async def terminate(self, grace: float = 2.0) -> int | None:
        """SIGHUP, then SIGKILL after ``grace`` seconds, then every process the child started
        (contained ones that left its group too, also when the child itself had already exited);
        returns the exit code. The tree is killed off the loop's thread."""
        if self.alive:
            self.signal(signal.SIGHUP)
            self.signal(signal.SIGCONT)
            if not await exits_within(lambda: self.alive, grace):
                if self.containment is not None and self._reaper is not None:
                    await self._reaper.kill_async(self.containment, include_root=True)
                self.signal(signal.SIGKILL)
                await exits_within(lambda: self.alive, None)
        if self.containment is not None and self._reaper is not None:
            await self._reaper.kill_async(self.containment, include_root=self.alive)
            self._tree_killed = True
        return self.returncode

    def kill_tree(self) -> int:
        """Kill whatever the child left running (it may have exited itself); returns how many."""
        if self.containment is None or self._reaper is None:
            return 0
        # the root's pid is only safe to follow while it is our unreaped child
        return self._reaper.kill(self.containment, include_root=self.alive)

    def close(self) -> None:
        """Kill what the child left behind, release the master and the pidfd."""
        if self.containment is not None and self._reaper is not None:
            if not self._tree_killed:  # not terminated first: kill here (a few /proc scans)
                self.kill_tree()
            self._reaper.release(self.containment)
            self.containment = None
        if self._reading:
            self.pause_reading()
        self._outbox.close()
        if self._master_open:
            os.close(self.master)
            self._master_open = False
        if self._pidfd >= 0:
            self._pidfd = release_pidfd(self.loop, self._pidfd, self._proc)
