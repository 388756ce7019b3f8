"""Every process a session started dies with it: setsid grandchildren and SIGHUP-ignorers included.

Killing the pane's process group is not enough: a grandchild that calls ``setsid`` leaves the
group, and one that ignores SIGHUP outlives the terminal. Each session is *contained* two ways:

- a cgroup of its own, when this machine lets the server make one (v2 with ``cgroup.kill`` or
  freezing, v1 ``freezer``): the child joins it between fork and exec, every descendant is born in
  it, and killing is freeze → SIGKILL every member → thaw, so nothing can fork its way out;
- always, a marker variable (``PANEWATCH_PANE``) in the agent's environment, inherited by every
  descendant that does not wipe its environment, plus the ancestry of the pane's root process.
  Members are stopped (SIGSTOP) until a scan finds no new one, then killed.

Live containments are recorded in ``panes-<server pid>-<n>.json`` in the state folder, locked for the
server's lifetime; a start that can take the lock of another file knows its server died without
cleaning up (SIGKILL), kills what it recorded, and says so in one log line.

Which pane a process belongs to is *not* decided here by the marker (an agent can set any
variable): report identity walks the real parent chain (:func:`session_of`).
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import secrets
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("panewatch.procs.proctree")

MARKER_VAR = "PANEWATCH_PANE"
CGROUP_ROOT = Path("/sys/fs/cgroup")
#: Rounds of stop-then-rescan before giving up on a tree that keeps growing.
MAX_ROUNDS = 50


# --- /proc ----------------------------------------------------------------------------------------


def stat_fields(pid: int) -> list[bytes] | None:
    """Fields of /proc/<pid>/stat after the command name (index 0 is the state, 1 the ppid, 5 the
    terminal's foreground process group), None if the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return raw[raw.rfind(b")") + 2 :].split()


def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, ppid) of a process, None if it is gone."""
    fields = stat_fields(pid)
    return None if fields is None else (fields[0].decode(), int(fields[1]))


def all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def signal_groups(pid: int, foreground: int | None, sig: int) -> None:
    """``sig`` to a pane's first process group and to its terminal's foreground group (a job the
    agent started in the foreground has a group of its own); gone or foreign groups are skipped."""
    for pgid in {pid} | ({foreground} if foreground and foreground > 0 else set()):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def live(pid: int) -> bool:
    """Running (not a zombie waiting for its parent)."""
    st = _stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def session_of(pid: int, roots: Mapping[int, str], max_hops: int = 256) -> str | None:
    """The session whose root process is ``pid`` or one of its ancestors (the real parent chain,
    which no process can rewrite for itself)."""
    for _ in range(max_hops):
        if pid in roots:
            return roots[pid]
        st = _stat(pid)
        if st is None or st[1] <= 1:
            return None
        pid = st[1]
    return None


def descendants(root: int) -> set[int]:
    """``root`` and every live process below it by the parent chain."""
    children: dict[int, list[int]] = {}
    for pid in all_pids():
        st = _stat(pid)
        if st is not None and st[0] not in ("Z", "X"):
            children.setdefault(st[1], []).append(pid)
    found: set[int] = set()
    stack = [root] if live(root) else []
    while stack:
        pid = stack.pop()
        if pid in found:
            continue
        found.add(pid)
        stack.extend(children.get(pid, ()))
    return found


def with_marker(markers: Iterable[str]) -> dict[int, str]:
    """Live processes whose environment holds one of these markers: pid → marker."""
    needles = {f"\0{MARKER_VAR}={m}\0".encode(): m for m in markers}
    if not needles:
        return {}
    me = os.getpid()
    found: dict[int, str] = {}
    for pid in all_pids():
        if pid == me:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = b"\0" + f.read()
        except OSError:
            continue
        for needle, marker in needles.items():
            if needle in env and live(pid):
                found[pid] = marker
                break
    return found


def _signal(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


# --- cgroups --------------------------------------------------------------------------------------


class Cgroups:
    """One writable hierarchy where the server makes a cgroup per session."""

    def __init__(self, base: Path, version: int) -> None:
        self.base = base  # <hierarchy>/panewatch
        self.version = version

    @classmethod
    def detect(cls, root: Path = CGROUP_ROOT) -> Cgroups | None:
        """The first usable hierarchy: unified v2 (with freezing), else v1 ``freezer``; None if the
        server may not create cgroups here (an unprivileged user without delegation, most containers)."""
        candidates: list[tuple[Path, int]] = []
        for v2 in (root, root / "unified"):
            if (v2 / "cgroup.controllers").exists():
                own = _own_cgroup(0)
                if own is not None:
                    candidates.append((v2 / own.lstrip("/"), 2))
        if (root / "freezer" / "freezer.state").exists() or (root / "freezer" / "tasks").exists():
            candidates.append((root / "freezer", 1))
        for hierarchy, version in candidates:
            base = hierarchy / "panewatch"
            try:
                base.mkdir(exist_ok=True)
                probe = base / f"probe-{os.getpid()}"
                probe.mkdir()
                ok = (probe / ("cgroup.freeze" if version == 2 else "freezer.state")).exists()
                probe.rmdir()
            except OSError:
                continue
            if ok:
                return cls(base, version)
        return None

    def create(self, name: str) -> Path:
        path = self.base / name
        path.mkdir()
        return path

    @staticmethod
    def procs(path: Path) -> set[int]:
        try:
            text = (path / "cgroup.procs").read_text()
        except OSError:
            return set()
        return {int(x) for x in text.split()}

    def freeze(self, path: Path, frozen: bool) -> None:
        try:
            if self.version == 2:
                (path / "cgroup.freeze").write_text("1" if frozen else "0")
            else:
                (path / "freezer.state").write_text("FROZEN" if frozen else "THAWED")
        except OSError:
            pass

    def kill_all(self, path: Path) -> set[int]:
        """Freeze, SIGKILL every member, thaw: a frozen process cannot fork, so none escapes."""
        members = self.procs(path)
        if not members:
            return set()
        if self.version == 2 and (path / "cgroup.kill").exists():
            try:
                (path / "cgroup.kill").write_text("1")
                return members
            except OSError:
                pass
        self.freeze(path, True)
        members = self.procs(path)
        _signal(members, signal.SIGKILL)
        self.freeze(path, False)
        return members

    @staticmethod
    def remove(path: Path) -> bool:
        try:
            path.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            return False


def _own_cgroup(hierarchy_id: int) -> str | None:
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            num, _, rest = line.partition(":")
            if num == str(hierarchy_id):
                return rest.partition(":")[2]
    except OSError:
        pass
    return None


def join_cgroup(path: Path) -> None:
    """Move the calling process into ``path`` (runs in the child between fork and exec)."""
    try:
        with open(path / "cgroup.procs", "w") as f:
            f.write(str(os.getpid()))
    except OSError:
        pass  # the marker still contains it


# --- one session's containment ---------------------------------------------------------------------


@dataclass
class Containment:
    session: str
    marker: str
    cgroup: Path | None = None
    root: int | None = None

    @property
    def env(self) -> dict[str, str]:
        return {MARKER_VAR: self.marker}

    def as_record(self) -> dict[str, object]:
        return {
            "session": self.session,
            "marker": self.marker,
            "root": self.root,
            "cgroup": str(self.cgroup) if self.cgroup else None,
        }


class Reaper:
    """The server's containments: make them, kill them whole, and clean up after a killed server."""

    def __init__(self, state_dir: Path | None, *, cgroups: Cgroups | bool | None = True) -> None:
        self.state_dir = state_dir
        self.cgroups: Cgroups | None = Cgroups.detect() if cgroups is True else (cgroups or None)
        self.live: dict[str, Containment] = {}
        self._lock = threading.Lock()  # kills run in worker threads; the registry is written from both
        self._lock_fd: int | None = None
        self._registry: Path | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    def open(self) -> int:
        """Take this server's registry, kill what dead servers left behind; returns how many."""
        if self.state_dir is None:
            return 0
        self.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        killed = self.cleanup_leftovers()
        lock = self.state_dir / f"panes-{os.getpid()}-{secrets.token_hex(3)}.lock"
        self._lock_fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._registry = lock.with_suffix(".json")
        self._save()
        return killed

    def close(self) -> None:
        """Kill what is still contained and drop the registry (a clean stop)."""
        for c in list(self.live.values()):
            self.kill(c, include_root=False)
            self.release(c)
        if self._lock_fd is not None and self._registry is not None:
            self._registry.unlink(missing_ok=True)
            self._registry.with_suffix(".lock").unlink(missing_ok=True)
            os.close(self._lock_fd)
            self._lock_fd = None

    def cleanup_leftovers(self) -> int:
        """Registries whose server is gone (their lock is free): kill every recorded pane's processes."""
        if self.state_dir is None:
            return 0
        killed, panes = 0, 0
        for lock in sorted(self.state_dir.glob("panes-*.lock")):
            try:
                fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # its server is alive
                registry = lock.with_suffix(".json")
                try:
                    records = json.loads(registry.read_text()).get("panes", [])
                except (OSError, ValueError):
                    records = []
                for rec in records:
                    cgroup = Path(rec["cgroup"]) if rec.get("cgroup") else None
                    c = Containment(rec["session"], rec["marker"], cgroup, rec.get("root"))
                    killed += self.kill(c, include_root=False)
                    panes += 1
                    if cgroup is not None:
                        Cgroups.remove(cgroup)
                registry.unlink(missing_ok=True)
                lock.unlink(missing_ok=True)
            finally:
                os.close(fd)
        if panes:
            log.warning(
                "a previous server was killed without cleaning up: killed %d leftover processes of %d panes",
                killed,
                panes,
            )
        return killed

    # -- containments ----------------------------------------------------------------------------
    def contain(self, session: str) -> Containment:
        """A new containment for ``session`` (its cgroup made now, joined by the child)."""
        marker = f"{session}.{secrets.token_hex(6)}"
        cgroup = None
        if self.cgroups is not None:
            try:
                cgroup = self.cgroups.create(f"{os.getpid()}-{marker}")
            except OSError as exc:
                log.warning("no cgroup for session %s (%s): the marker variable contains it", session, exc)
        return Containment(session, marker, cgroup)

    def started(self, c: Containment, pid: int) -> None:
        c.root = pid
        if c.cgroup is not None and pid not in Cgroups.procs(c.cgroup):
            log.warning("session %s did not join its cgroup: the marker variable contains it", c.session)
            Cgroups.remove(c.cgroup)
            c.cgroup = None
        with self._lock:
            self.live[c.session] = c
            self._save()

    def members(self, c: Containment, include_root: bool = False) -> set[int]:
        """Live processes of this containment right now. A cgroup holds every descendant (each is
        born in it), so its list is enough; without one, marker holders and the root's tree."""
        if c.cgroup is not None and c.cgroup.is_dir():
            found = {p for p in Cgroups.procs(c.cgroup) if live(p)}
        else:
            found = set(with_marker([c.marker]))
            if include_root and c.root is not None:
                found |= descendants(c.root)
        found.discard(os.getpid())
        return found

    def _round(self, c: Containment, include_root: bool, stopped: set[int]) -> set[int]:
        """One round: kill the cgroup whole, stop every other member; returns the members seen."""
        if c.cgroup is not None and self.cgroups is not None:
            self.cgroups.kill_all(c.cgroup)
        members = self.members(c, include_root)
        new = members - stopped
        _signal(new, signal.SIGSTOP)
        stopped |= new
        return new

    def kill(self, c: Containment, include_root: bool = False) -> int:
        """Kill every process of ``c`` (synchronously; a few /proc scans). Returns how many."""
        stopped: set[int] = set()
        for _ in range(MAX_ROUNDS):
            if not self._round(c, include_root, stopped):
                break
        _signal(stopped, signal.SIGKILL)
        _signal(stopped, signal.SIGCONT)
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and any(live(p) for p in stopped):
            time.sleep(0.005)
        return len(stopped)

    async def kill_async(self, c: Containment, include_root: bool = False) -> int:
        """:meth:`kill` off the event loop's thread (the scans read /proc)."""
        return await asyncio.to_thread(self.kill, c, include_root)

    def release(self, c: Containment) -> None:
        """Forget a containment whose processes are gone (its cgroup is removed)."""
        if c.cgroup is not None and not Cgroups.remove(c.cgroup):
            self.kill(c, include_root=False)
            Cgroups.remove(c.cgroup)
        with self._lock:
            if self.live.get(c.session) is c:
                del self.live[c.session]
                self._save()

    def _save(self) -> None:
        """Write the registry atomically (the lock lives on its own file, so a rename is safe)."""
        if self._registry is None:
            return
        data = json.dumps({"server": os.getpid(), "panes": [c.as_record() for c in self.live.values()]})
        tmp = self._registry.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(data)
        os.replace(tmp, self._registry)


# -- one child process's end: waiting for it, and never leaving a zombie ----------------------
_REAPERS: set[asyncio.Task[None]] = set()


async def exits_within(alive: Callable[[], bool], grace: float | None) -> bool:
    """Wait up to ``grace`` seconds (``None``: as long as it takes, after a SIGKILL) for
    ``alive()`` to turn False, which the pidfd callback does; True if it did."""
    loop = asyncio.get_running_loop()
    deadline = None if grace is None else loop.time() + grace
    while alive():
        if deadline is not None and loop.time() >= deadline:
            return False
        await asyncio.sleep(0.02 if deadline is not None else 0.01)
    return True


def release_pidfd(loop: asyncio.AbstractEventLoop, pidfd: int, proc: subprocess.Popen[bytes]) -> int:
    """Stop watching a child's pidfd and close it; a child still running is reaped in the
    background when it goes (no zombie). Returns -1, the closed descriptor's new value."""
    loop.remove_reader(pidfd)
    os.close(pidfd)
    if proc.poll() is None:
        task = asyncio.ensure_future(_reap_later(proc))
        _REAPERS.add(task)  # the loop holds tasks weakly: keep it until it is done
        task.add_done_callback(_REAPERS.discard)
    return -1


async def _reap_later(proc: subprocess.Popen[bytes]) -> None:
    while proc.poll() is None:
        await asyncio.sleep(0.5)
