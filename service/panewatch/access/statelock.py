"""One server per state folder: an exclusive lock on ``<state folder>/server.lock``, held for life.

Two servers on one folder share its tmux socket, registry and reaper files: the second adopted
the first's panes and its DELETE killed them (tmux host), or marked the first's live agents lost
(pty host) — issue 25. ``flock`` is released by the kernel when the holder dies, however it dies,
so a SIGKILLed server never leaves a stale lock behind (the pid written in the file is only for
the message). The descriptor is ``O_CLOEXEC``: an agent (or the tmux server) that inherited it
would hold the folder after the server is gone, and the next start would be refused for ever.

The pty host's reaper keeps lock files of its own here (``panes-<pid>-<n>.lock``, one per
server, whose registries are cleaned up once their lock is free); this name is not one of them.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

LOCK_FILE = "server.lock"


class StateLockError(Exception):
    """Another live process holds the state folder; the message names it in one line."""


class StateLock:
    """The held lock; ``release()`` (or the process's end) lets the next server in."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor of the open file releases the flock
            self._fd = None


def _holder(fd: int, path: Path) -> int | None:
    """The pid written by the holder, else the one ``/proc/locks`` names for this file's inode
    (the holder may not have written it yet)."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        if text.isdigit():
            return int(text)
        st = os.fstat(fd)
        wanted = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
        with open("/proc/locks") as f:
            for line in f:
                fields = line.split()
                # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" (a blocked waiter has "->" first)
                if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == wanted and fields[4].isdigit():
                    return int(fields[4])
    except OSError:
        return None
    return None


def lock_state_dir(state_dir: Path) -> StateLock:
    """Take the state folder's lock at once or raise ``StateLockError`` naming who holds it."""
    path = Path(state_dir) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise StateLockError(f"cannot open the lock file {path}: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        pid = _holder(fd, path) if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN) else None
        os.close(fd)
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise StateLockError(f"cannot lock {path}: {exc.strerror or exc}") from None
        who = f"pid {pid}" if pid is not None else "another process"
        raise StateLockError(
            f"another panewatch serve ({who}) already uses the state folder {state_dir}; "
            "stop it, or give this one another --state-dir"
        ) from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError:
        pass  # the pid is for the message only; the lock is what counts
    return StateLock(path, fd)
