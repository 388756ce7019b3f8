"""Finding and ending an agent's processes (its marker, cgroup and tree) and writing the
launch script that puts it there."""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import shlex
import time
from pathlib import Path

from ...procs.proctree import MARKER_VAR, Cgroups, Containment, Reaper
from ..base import LaunchSpec

log = logging.getLogger("panewatch.hosts.tmux")


def folder_tag(state_dir: Path) -> str:
    """A short name of the state folder: servers of other folders share the process table and the
    cgroup tree, so what a server finds its agents by names its folder too."""
    return hashlib.sha256(os.fsencode(os.path.realpath(state_dir))).hexdigest()[:8]


def pane_marker(tag: str, session: str) -> str:
    """The marker variable's value in an agent's environment (``proctree.MARKER_VAR``): derived
    from the state folder (``folder_tag``) and the session id, so a server that adopts the pane
    after a restart finds its processes too, and a server of another folder with a session of the
    same id never kills them (two test workers did: the same ids, one marker)."""
    return f"tmux.{tag}.{session}"


def cgroup_name(state_dir: Path, session: str) -> str:
    """The pane's cgroup, derived from the state folder and the session id like its marker (the
    path is also kept in a window option, for a server whose own cgroup moved)."""
    return f"tmux-{folder_tag(state_dir)}-{session}"


#: The shared reaper's stop-rescan-kill without records: tmux agents are no children of the server
#: and must outlive it (no leftovers file); their cgroup, if any, is killed first (``kill_tree``).
_REAPER = Reaper(None, cgroups=False)


def kill_tree(session: str, marker: str, root: int | None, cgroup: tuple[Cgroups, Path] | None = None) -> int:
    """Kill every process of an agent: its cgroup whole (frozen, then killed: nothing forks out of
    it), its tree by the parent chain and whatever carries its marker (a ``setsid`` grandchild
    whose parent died); returns how many (proctree, blocking). The emptied cgroup is removed."""
    killed = 0
    if cgroup is not None:
        cgroups, path = cgroup
        killed += len(cgroups.kill_all(path))
    killed += _REAPER.kill(Containment(session, marker, None, root), include_root=root is not None)
    if cgroup is not None:
        _remove_cgroup(cgroup[1])
    return killed


def _remove_cgroup(path: Path) -> None:
    """rmdir once the killed members are gone (they leave the cgroup as they exit, a moment later)."""
    for _ in range(200):
        if Cgroups.remove(path):
            return
        time.sleep(0.01)
    log.warning("could not remove the cgroup %s: a process in it did not die", path)


def tree_members(session: str, marker: str, root: int | None) -> set[int]:
    """The processes ``kill_tree`` would kill now."""
    return _REAPER.members(Containment(session, marker, None, root), include_root=root is not None)


def write_launch(
    folder: Path, marker: str, env_path: str, spec: LaunchSpec, argv: list[str], cgroup: Path | None
) -> Path:
    """The pane's command as a script (0600, private folder): it deletes itself, joins the
    pane's cgroup and execs ``env -i`` with the agent's environment, so no length limit of
    tmux's command line applies and nothing of the server's environment leaks in."""
    if "=" in os.path.basename(argv[0]):
        argv[0] = os.path.abspath(argv[0])  # env(1) would take NAME=VALUE for a variable
    env = {**spec.env, MARKER_VAR: marker}
    assignments = [f"{k}={v}" for k, v in env.items() if k and "=" not in k and "\0" not in k + v]
    folder.mkdir(mode=0o700, exist_ok=True)
    path = folder / f"{spec.session}-{secrets.token_hex(4)}.sh"
    lines = [f"rm -f -- {shlex.quote(str(path))}"]
    if cgroup is not None:  # a failed join leaves the marker and the tree to contain it
        lines.append(f"{{ echo $$ > {shlex.quote(str(cgroup / 'cgroup.procs'))}; }} 2>/dev/null")
    words = [env_path, "-i", *assignments, *argv]
    lines.append("exec " + " ".join(shlex.quote(w) for w in words))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(("\n".join(lines) + "\n").encode("utf-8", "surrogateescape"))
    return path


def make_cgroup(cgroups: Cgroups | None, state_dir: Path, session: str) -> Path | None:
    """The pane's own cgroup (made now, joined by its launch script), None where none can be."""
    if cgroups is None:
        return None
    try:
        path = cgroups.base / cgroup_name(state_dir, session)
        path.mkdir(exist_ok=True)  # a resumed session reuses its name
        return path
    except OSError as exc:
        log.warning("no cgroup for session %s (%s): its marker variable contains it", session, exc)
        return None
