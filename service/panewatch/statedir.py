"""The state folder: what a Panewatch instance keeps between runs (tmux socket, registry, token).

Private to the user (0700, files 0600) because the socket drives every agent and the token
drives the API. Every problem with it is one line naming the path and what to do.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

TOKEN_FILE = "token"


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


def prepare_state_dir(state_dir: Path) -> Path:
    """Create the folder (0700) or check it: ours, writable, not readable by others."""
    state_dir = Path(state_dir)
    check_private(state_dir, "state folder")
    try:
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
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
    if stat.S_IMODE(state_dir.stat().st_mode) & 0o077:
        os.chmod(state_dir, 0o700)
    return state_dir


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
