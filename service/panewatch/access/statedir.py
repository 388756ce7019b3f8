"""The state folder: what a Panewatch instance keeps between runs (tmux socket, registry, token).

Private to the user (0700, files 0600) because the socket drives every agent and the token
drives the API. Agents run as other users (``agent_users``: the README's hard boundary) must
still reach the report socket in it, so then the folder is 0711 — others may pass through to a
name they know, never list it — and every file in it is checked to be ours and 0600 (the report
socket alone is 0666: the caller's ancestry, not the mode, decides what it may report). Every
problem with it is one line naming the path and what to do.
"""

from __future__ import annotations

import os
import pwd
import secrets
import stat
from collections.abc import Sequence
from pathlib import Path

TOKEN_FILE = "token"
#: The folder's mode by default, and when agents run as other users (they pass through, never list).
PRIVATE_MODE = 0o700
OPEN_MODE = 0o711
#: Folders an agent must pass through, maybe as another user: the report socket's, and the
#: sandbox's filter that the pane's shell opens before bwrap (behind a user switch, as that user).
PASSABLE = frozenset({"report", "sandbox"})


class StateDirError(Exception):
    """The state folder (or something in it) cannot be used; the message says why in one line."""


def check_private(path: Path, what: str) -> None:
    """Refuse a file, folder or socket that belongs to someone else."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StateDirError(f"cannot use the {what} {path}: {exc.strerror or exc}; use another --state-dir") from None
    if st.st_uid != os.getuid():
        raise StateDirError(f"{what} {path} belongs to another user (uid {st.st_uid}); use a --state-dir of your own")
    if what == "tmux socket" and not stat.S_ISSOCK(st.st_mode):
        raise StateDirError(f"{path} is not a socket; move it aside or use another --state-dir")


def prepare_state_dir(state_dir: Path, mode: int | None = None) -> Path:
    """Create the folder or check it: ours, writable, not readable by others. ``mode`` (0700, or
    0711 for agents of other users) is set as given; without it (a later check of the same
    folder) 0700 or 0711 is kept as found and anything looser made 0700."""
    state_dir = Path(state_dir)
    check_private(state_dir, "state folder")
    try:
        state_dir.mkdir(mode=mode or PRIVATE_MODE, parents=True, exist_ok=True)
    except OSError as exc:
        raise StateDirError(
            f"cannot create the state folder {state_dir}: {exc.strerror or exc}; use another --state-dir"
        ) from None
    if not state_dir.is_dir():
        raise StateDirError(f"the state folder {state_dir} is not a folder; use another --state-dir")
    if not os.access(state_dir, os.W_OK | os.X_OK):
        raise StateDirError(
            f"the state folder {state_dir} is not writable; fix its permissions or use another --state-dir"
        )
    found = stat.S_IMODE(state_dir.stat().st_mode)
    wanted = mode if mode is not None else (found if found in (PRIVATE_MODE, OPEN_MODE) else PRIVATE_MODE)
    if found != wanted:
        os.chmod(state_dir, wanted)
    return state_dir


def secure_contents(state_dir: Path) -> None:
    """Every entry of the folder ours, files 0600 and folders 0700 (the report socket stays
    0666). Run at start, before anything listens: a file another user could open through a
    0711 folder, or one that is not ours, is made private or refused here."""
    try:
        entries = list(os.scandir(state_dir))
    except OSError as exc:
        raise StateDirError(f"cannot read the state folder {state_dir}: {exc.strerror or exc}") from None
    for entry in entries:
        path = Path(entry.path)
        st = entry.stat(follow_symlinks=False)
        if st.st_uid != os.getuid():
            raise StateDirError(
                f"{path} in the state folder belongs to another user (uid {st.st_uid}); remove it or use another --state-dir"
            )
        if stat.S_ISLNK(st.st_mode) or (stat.S_ISSOCK(st.st_mode) and entry.name.startswith("report")):
            continue  # a link's own mode means nothing; the report socket is open by design
        if stat.S_ISDIR(st.st_mode) and entry.name in PASSABLE:
            # as passable as the state folder itself (0711 with agent_users), never listable
            wanted = 0o700 | (stat.S_IMODE(os.stat(state_dir).st_mode) & 0o011)
            if stat.S_IMODE(st.st_mode) != wanted:
                os.chmod(path, wanted)
            continue
        private = 0o700 if stat.S_ISDIR(st.st_mode) else 0o600
        if stat.S_IMODE(st.st_mode) & 0o077:
            os.chmod(path, stat.S_IMODE(st.st_mode) & private)


def _searchable_by(st: os.stat_result, uid: int, groups: Sequence[int]) -> bool:
    if uid == 0:
        return True
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid in groups:
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def check_reachable(state_dir: Path, users: Sequence[str]) -> None:
    """Each of ``users`` can pass through every folder above the state folder (so its agents'
    hooks reach the report socket, not ``curl: (7)``); one line naming the folder that stops it.
    Run before the state folder is made (it gets 0711 itself): a refused start changes nothing.
    Folders not made yet are skipped: ``mkdir -p`` makes them passable."""
    chain = [p for p in reversed(Path(os.path.abspath(state_dir)).parents) if p.exists()]
    for name in users:
        try:
            user = pwd.getpwnam(name)
        except KeyError:
            raise StateDirError(f"agent_users: there is no user {name!r} on this machine") from None
        groups = os.getgrouplist(name, user.pw_gid)
        for each in chain:
            st = each.stat()
            if not _searchable_by(st, user.pw_uid, groups):
                owner = _name_of(st.st_uid)
                raise StateDirError(
                    f"agent_users: {name} cannot reach the report socket: {each} (mode {stat.S_IMODE(st.st_mode):o}, "
                    f"owner {owner}) does not let them pass; put --state-dir where every parent folder is "
                    f"searchable by them (e.g. /var/lib/panewatch, /tmp/panewatch-state), or chmod o+x {each}"
                )


def _name_of(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def load_or_create_token(state_dir: Path) -> str:
    """The API token kept across restarts (0600), so an open dashboard stays logged in."""
    path = prepare_state_dir(state_dir) / TOKEN_FILE
    check_private(path, "token file")
    try:
        token = path.read_text().strip()
    except FileNotFoundError:
        token = ""
    except OSError as exc:
        raise StateDirError(f"cannot read the token file {path}: {exc.strerror or exc}") from None
    if len(token) >= 8:
        if stat.S_IMODE(path.stat().st_mode) & 0o077:
            os.chmod(path, 0o600)
        return token
    token = secrets.token_urlsafe(24)
    tmp = path.with_suffix(".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        raise StateDirError(f"cannot write the token file {path}: {exc.strerror or exc}") from None
    return token
