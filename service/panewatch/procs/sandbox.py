"""Each agent in a bubblewrap sandbox of its own, so that no pane can reach the supervisor or another pane.

Every agent runs as the user who started Panewatch, and the same uid passes every access check
there is: tmux's (``send-keys`` to any pane through the server's socket), ``/proc/<pid>/fd`` of the
server, every pane's ``/dev/pts/N`` (0620, the user's), signals and ptrace. Hiding a path does not
help: an agent finds it in ``/proc``. So each agent is started inside ``bwrap`` (bubblewrap, the
sandbox Flatpak and Codex use) with:

- the filesystem as the user sees it, except the state folder (tmux socket, registry, token,
  launch files) and the server's other secrets, masked; the report socket's own folder is bound
  back at its same path, so hooks keep reporting (and reach the next server after a restart);
- a PID namespace with its own ``/proc``: no other pane's or the server's process can be seen,
  signalled or traced, and when the sandbox's first process dies the kernel kills every process
  in it (a ``setsid`` double-fork cannot outlive its pane);
- a ``/dev`` of its own: only its own terminal, and a ``devpts`` instance for ptys it opens;
- no capabilities (``--cap-drop ALL``: as root, bwrap would keep them all), ``/sys`` read-only;
- a seccomp filter refusing ``TIOCSTI`` and ``TIOCLINUX`` (typing into its own terminal's input
  would let an agent's child answer the agent's own prompt).

A user-switching wrapper (``sudo -u agent --``) stays in front of the sandbox: bwrap sets
``no_new_privs``, so setuid works only outside it. Inside, a few lines of Python put the agent in
a process group of its own that holds the terminal, so ``^C`` reaches the agent and never bwrap
(which would die of it and take the pane along), then exec it.

The policy (what is hidden) is state, built once from the settings; :class:`Sandbox` is the
runtime: it checks once at start that bubblewrap works here, builds the filter off the event
loop, says once what isolation is lost and why, and wraps each launch (:meth:`Sandbox.wrap`).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..config import Settings
from .wrappers import split_launch

__all__ = [
    "AGENT_NSPID",
    "Policy",
    "Sandbox",
    "Uncontainable",
    "agent_in_sandbox",
    "legacy_tiocsti",
    "sandbox_for",
]

log = logging.getLogger("panewatch.procs.sandbox")

#: The agent's pid inside its namespace: bwrap's init is 1, the helper that gives it the terminal
#: is 2 and execs the agent (a fresh namespace hands pids out in order).
AGENT_NSPID = 2
#: ioctl commands that push bytes into a terminal's input (``TIOCLINUX`` 2 pastes a selection).
TIOCSTI = 0x5412
TIOCLINUX = 0x541C
#: Host devices an agent may need that belong to no pane (GPUs, KVM); bound when present.
DEVICES = ("/dev/dri", "/dev/kvm")
#: Run inside the sandbox before the agent: a process group of its own that holds the terminal,
#: so ``^C`` reaches the agent and never bwrap (which would die of it and take the pane along);
#: the signals Python ignores are set back before the exec. It takes the agent's name first, so a
#: foreground read in between names the agent, not Python. ``sh -m`` cannot do it: it exits 2
#: when it cannot hand the terminal back to a group outside the namespace, losing the status.
FOREGROUND_CODE = (
    "import os,signal,sys\n"
    "try:\n"
    " with open('/proc/self/comm','w') as f:f.write(os.path.basename(sys.argv[1])[:15])\n"
    "except OSError:pass\n"
    "try:\n"
    " os.setpgid(0,0);signal.signal(signal.SIGTTOU,signal.SIG_IGN);os.tcsetpgrp(0,os.getpid())\n"
    "except OSError:pass\n"
    "for s in(signal.SIGTTOU,signal.SIGPIPE,signal.SIGXFSZ):signal.signal(s,signal.SIG_DFL)\n"
    "try:os.execvp(sys.argv[1],sys.argv[1:])\n"
    "except OSError as e:sys.stderr.write(f'{sys.argv[1]}: {e.strerror}\\n');sys.exit(127 if e.errno==2 else 126)\n"
)
#: Opens the seccomp filter as fd 3 for bwrap after any wrapper (sudo closes inherited fds).
OPEN_FILTER = ("/bin/sh", "-c", 'exec 3<"$0" || exit 126; exec "$@"')
FILTER_NAME = "tiocsti.bpf"


class Uncontainable(Exception):
    """This command cannot run in the sandbox as given; the message says why and what to do."""


@dataclass(frozen=True)
class Policy:
    """What a sandbox hides: the state folder and the server's other secrets (token file, config
    file, cluster credentials, recordings). The report socket's folder is let back in."""

    state_dir: Path
    secrets: tuple[Path, ...] = ()
    bwrap: str = "bwrap"
    devices: tuple[str, ...] = field(default=DEVICES)
    #: other users may pass through the state folder (``agent_users``): the filter is reachable to them
    others_pass: bool = False

    def hidden(self) -> list[Path]:
        """Existing paths to mask, resolved (bwrap mounts on the real path)."""
        found: list[Path] = []
        for path in (self.state_dir, *self.secrets):
            real = Path(os.path.realpath(path))
            if real.exists() and real not in found:
                found.append(real)
        return found


def legacy_tiocsti() -> bool:
    """Whether the kernel lets a process push input into its own terminal (``TIOCSTI``): true
    unless ``dev.tty.legacy_tiocsti`` is 0 (kernels before 6.2 have no such setting)."""
    try:
        return Path("/proc/sys/dev/tty/legacy_tiocsti").read_text().strip() != "0"
    except OSError:
        return True


def userns_closed() -> str | None:
    """Why a user other than root cannot make a user namespace here (what bwrap needs when it runs
    after a user switch), or None when nothing says so."""
    settings = (
        ("/proc/sys/user/max_user_namespaces", "0", "user.max_user_namespaces is 0"),
        ("/proc/sys/kernel/unprivileged_userns_clone", "0", "kernel.unprivileged_userns_clone is 0"),
        (
            "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
            "1",
            "kernel.apparmor_restrict_unprivileged_userns is 1 (bwrap needs an AppArmor profile)",
        ),
    )
    for path, closed, why in settings:
        try:
            if Path(path).read_text().strip() == closed:
                return why
        except OSError:
            continue
    return None


def build_filter(path: Path) -> str | None:
    """Write the BPF program refusing TIOCSTI/TIOCLINUX (EPERM) to ``path``; None, or why not.

    libseccomp (through ``pyseccomp``) compiles it for the native and compat architectures (on
    x86-64 also i386 and x32, whose ioctl numbers differ) and compares the command's low 32 bits
    only, as the kernel does. Blocking: run it off the event loop."""
    try:
        import pyseccomp  # type: ignore[import-untyped]  # ctypes over libseccomp.so.2, no stubs
    except (ImportError, OSError) as exc:
        return f"libseccomp cannot be loaded ({exc})"
    try:
        rules = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
        compat = {pyseccomp.Arch.X86_64: (pyseccomp.Arch.X86, pyseccomp.Arch.X32)}
        for arch in compat.get(pyseccomp.system_arch(), ()):
            rules.add_arch(arch)
        for cmd in (TIOCSTI, TIOCLINUX):
            rules.add_rule(
                pyseccomp.ERRNO(errno.EPERM), "ioctl", pyseccomp.Arg(1, pyseccomp.MASKED_EQ, 0xFFFFFFFF, cmd)
            )
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o711)
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as out:
            rules.export_bpf(out)
        os.chmod(tmp, 0o644)  # read by the sh before bwrap, maybe as the user a wrapper switched to
        os.replace(tmp, path)
    except OSError as exc:
        return f"the filter could not be built ({exc.strerror or exc})"
    return None


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return []


def _nspid(pid: int) -> list[int] | None:
    """``NSpid`` of a process: its pid in each namespace from the reader's down to its own."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"NSpid:"):
                    return [int(x) for x in line.split()[1:]]
    except (OSError, ValueError):
        pass
    return None


def agent_in_sandbox(root: int, max_depth: int = 8) -> int | None:
    """This machine's pid of the agent in the sandbox started as ``root`` (through any wrappers):
    the process one PID namespace below ``root`` numbered ``AGENT_NSPID`` there. None until it
    exists. A few small ``/proc`` reads along the child chain, no scan of every process."""
    own = _nspid(root)
    if own is None:
        return None
    frontier = [root]
    for _ in range(max_depth):
        below: list[int] = []
        for pid in frontier:
            for child in _children(pid):
                ns = _nspid(child)
                if ns is None or len(ns) > len(own) + 1:
                    continue
                if len(ns) == len(own) + 1 and ns[-1] == AGENT_NSPID:
                    return child
                below.append(child)
        if not below:
            return None
        frontier = below
    return None


def _reachable_by_all(path: str) -> bool:
    """Every folder on the way searchable and the file executable by any user (a wrapper may
    switch to another one before the helper runs)."""
    try:
        if not os.stat(path).st_mode & stat.S_IXOTH:
            return False
        return all(os.stat(parent).st_mode & stat.S_IXOTH for parent in Path(path).parents)
    except OSError:
        return False


def interpreter() -> str:
    """The Python that runs the helper: this one, or the system's when a user a wrapper switches to
    could not run this one (a pyenv under /root)."""
    mine = os.path.realpath(sys.executable)
    for candidate in (mine, os.path.realpath("/usr/bin/python3")):
        if _reachable_by_all(candidate):
            return candidate
    return mine


def _is_setuid(program: str, env: Mapping[str, str]) -> bool:
    path = program if os.sep in program else shutil.which(program, path=env.get("PATH", os.defpath))
    try:
        mode = os.stat(path).st_mode if path else 0
    except OSError:
        return False
    return bool(mode & (stat.S_ISUID | stat.S_ISGID))


class Sandbox:
    """The runtime of containment: checked once at start, then every launch wrapped the same way.

    ``policy`` None means containment is off (``--no-contain``): launches are not wrapped and
    ``start`` only says what that leaves open."""

    def __init__(self, policy: Policy | None) -> None:
        self.policy = policy
        self.active = False
        self.filter: Path | None = None
        self.lost: list[str] = []  # what isolation is missing here, and why (said once at start)
        self._started: asyncio.Task[None] | None = None
        self._options: list[str] = []
        self._hidden: list[Path] = []
        self._helper: list[str] = []

    async def start(self) -> None:
        """Probe bubblewrap and build the filter once, off the loop; log what holds and what not."""
        if self._started is None:
            self._started = asyncio.ensure_future(asyncio.to_thread(self._prepare))
        await asyncio.shield(self._started)

    def _prepare(self) -> None:
        tiocsti_open = legacy_tiocsti()
        if self.policy is None:
            log.info("agents are not contained (contain is off): any agent can read and type into every other pane")
            if tiocsti_open:
                log.warning(
                    "dev.tty.legacy_tiocsti is 1 and agents are not contained: an agent can push input into "
                    "its own terminal (TIOCSTI) and answer its own prompt; set sysctl dev.tty.legacy_tiocsti=0"
                )
            return
        bwrap = shutil.which(self.policy.bwrap)
        if bwrap is None:
            self._lost("bubblewrap is not installed (Debian: apt-get install bubblewrap)", tiocsti_open)
            return
        self._hidden = self.policy.hidden()
        self._helper = [interpreter(), "-I", "-S", "-c", FOREGROUND_CODE]
        self._options = self._base_options(bwrap)
        if tiocsti_open:
            why = build_filter(self.policy.state_dir / "sandbox" / FILTER_NAME)
            if why is None:
                self.filter = self.policy.state_dir / "sandbox" / FILTER_NAME
            else:
                self.lost.append(f"TIOCSTI is not refused: {why}")
                log.warning(
                    "dev.tty.legacy_tiocsti is 1 and %s: a contained agent can still push input into its own "
                    "terminal (TIOCSTI) and answer its own prompt; set sysctl dev.tty.legacy_tiocsti=0",
                    self.lost[-1],
                )
        self.active = True
        # bwrap with every option and the filter, around /bin/true: the helper is plain Python
        probe = [*OPEN_FILTER, str(self.filter), *self._options] if self.filter else list(self._options)
        probe += ["--seccomp", "3", "--", "/bin/true"] if self.filter else ["--", "/bin/true"]
        try:
            done = subprocess.run(probe, stdin=subprocess.DEVNULL, capture_output=True, timeout=20, check=False)
            failed = done.returncode != 0
            detail = done.stderr.decode("utf-8", "replace").strip().splitlines()
            reason = detail[-1] if detail else f"exit status {done.returncode}"
        except (OSError, subprocess.SubprocessError) as exc:
            failed, reason = True, str(exc)
        if failed:
            self.active = False
            self.filter = None
            self._lost(f"bubblewrap cannot make a sandbox here: {reason}", tiocsti_open)
            return
        log.info(
            "agents are contained (bubblewrap: own PID namespace and /dev, no capabilities, the state folder hidden%s)",
            ", TIOCSTI refused" if self.filter else "",
        )
        if os.geteuid() == 0 and (why := userns_closed()) is not None:
            log.warning(
                "agents switched to another user (sudo -u USER -- ...) cannot be contained here: bubblewrap needs "
                "unprivileged user namespaces for them, and %s",
                why,
            )

    def _lost(self, why: str, tiocsti_open: bool) -> None:
        self.lost.append(why)
        log.warning(
            "agents are NOT contained: %s. Any agent can read and type into every other pane (the tmux socket, "
            "/proc/<pid>/fd, /dev/pts) and signal the server%s. Install bubblewrap with user namespaces allowed "
            "(kernel.unprivileged_userns_clone=1 where that exists), or pass --no-contain to say this is meant",
            why,
            "; dev.tty.legacy_tiocsti is 1: TIOCSTI is open too" if tiocsti_open else "",
        )

    def _base_options(self, bwrap: str) -> list[str]:
        """bwrap's words before the per-launch ones: the user's filesystem, then what is taken away."""
        assert self.policy is not None
        opts = [bwrap, "--dev-bind", "/", "/", "--ro-bind", "/sys", "/sys", "--dev", "/dev"]
        opts += ["--perms", "1777", "--tmpfs", "/dev/shm"]  # bwrap's own /dev/shm is 0755
        for device in self.policy.devices:
            opts += ["--dev-bind-try", device, device]
        opts += ["--proc", "/proc"]
        for path in self._hidden:
            if path.is_dir():
                opts += ["--perms", "0700", "--tmpfs", str(path)]
            else:
                opts += ["--ro-bind", "/dev/null", str(path)]  # nodev: opening it is refused
        opts += ["--unshare-pid", "--unshare-ipc", "--die-with-parent", "--cap-drop", "ALL"]
        return opts

    def _let_in(self, env: Mapping[str, str]) -> list[str]:
        """The report socket's folder, bound back when it lies in a hidden one (its folder, not the
        socket itself: a restarted server makes a new socket there, which a file bind would miss)."""
        sock = env.get("PANEWATCH_REPORT_SOCKET")
        if not sock:
            return []
        folder = Path(os.path.realpath(os.path.dirname(sock)))
        hidden = self._hidden
        if folder in hidden or not any(folder.is_relative_to(h) for h in hidden):
            return []  # the whole hidden folder itself is never let back in
        return ["--bind", str(folder), str(folder)]

    def wrap(self, argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
        """``argv`` to start instead, contained: wrappers in front, then bwrap, then the agent.
        Unchanged when containment is off or unavailable; ``Uncontainable`` when it cannot be."""
        if self.policy is not None and (self._started is None or not self._started.done()):
            raise Uncontainable("containment is not ready: the host was not started")
        if not self.active:
            return list(argv)
        return self._wrap(argv, env)

    def _wrap(self, argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
        launch = split_launch(argv)
        if not launch.agent:
            raise Uncontainable(
                f"cannot contain {' '.join(argv)[:120]!r}: the command {argv[0]!r} runs is one string, so the "
                "sandbox cannot go between it and the agent; give the agent's argv after the wrapper "
                "(sudo -u USER -- COMMAND, runuser -u USER -- COMMAND) or turn containment off (--no-contain)"
            )
        if _is_setuid(launch.agent[0], env):
            raise Uncontainable(
                f"cannot contain {launch.agent[0]!r}: it is setuid/setgid (it switches user itself), which does "
                "not work in the sandbox (no_new_privs); switch user in front (sudo -u USER -- COMMAND) or turn "
                "containment off (--no-contain)"
            )
        others_pass = self.policy is not None and self.policy.others_pass
        if launch.switches_user and self.filter is not None and not others_pass:
            raise Uncontainable(
                f"cannot contain {' '.join(argv)[:120]!r}: {launch.prefix[0]!r} runs it as another user, who cannot "
                "reach the sandbox's filter (nor the report socket) in this server's private state folder; start "
                "serve with --agent-users USER for that user, or turn containment off (--no-contain)"
            )
        inner = [*self._options, *self._let_in(env)]
        if self.filter is not None:
            return [
                *launch.prefix,
                *OPEN_FILTER,
                str(self.filter),
                *inner,
                "--seccomp",
                "3",
                "--",
                *self._helper,
                *launch.agent,
            ]
        return [*launch.prefix, *inner, "--", *self._helper, *launch.agent]


def secret_paths(paths: Iterable[Path | None]) -> tuple[Path, ...]:
    """The given paths that are set (the token file, the config file, ...), for ``Policy.secrets``."""
    return tuple(p for p in paths if p is not None)


def tmux_default_folder() -> Path:
    """Where tmux keeps the user's own servers' sockets (``$TMUX_TMPDIR/tmux-UID``): hidden too,
    so that an agent cannot drive the user's own tmux sessions (or a server started there)."""
    return Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}"


def sandbox_for(settings: Settings, state_dir: Path) -> Sandbox:
    """The sandbox ``settings`` ask for: off with ``contain = false``, else hiding the state folder
    and every file of the server's own that holds a secret (token, config, cluster keys, recordings),
    and the user's own tmux sockets."""
    if not settings.contain:
        return Sandbox(None)
    config = settings.config or os.environ.get("PANEWATCH_CONFIG")
    secrets = secret_paths(
        [
            tmux_default_folder(),
            settings.token_file,
            Path(config) if config else None,
            settings.cluster_creds,
            settings.cluster_tls_key,
            settings.transcripts,
        ]
    )
    return Sandbox(Policy(Path(state_dir), secrets, others_pass=bool(settings.agent_users)))
