"""``panewatch attach SESSION``: open an agent's pane in the user's own terminal, read-write.

It is tmux's own ``attach``, on the instance's private socket, so detaching (``C-b d``) leaves
the agent running and the service keeps reading its screen all along. A pty-hosted session has
no terminal to share: that is said plainly instead.
"""

from __future__ import annotations

import os
from pathlib import Path

from .hosts.tmux import attach_argv, socket_path, tmux_usable
from .registry import REGISTRY_FILE, Record, Registry, RegistryError


class AttachError(Exception):
    """Why the pane cannot be attached, in one line."""


def find_session(state_dir: Path, wanted: str) -> Record:
    """The registry's session with this id, or else the only one with this name."""
    path = state_dir / REGISTRY_FILE
    if not path.exists():
        raise AttachError(f"no sessions recorded in {state_dir} (is `panewatch serve` using this --state-dir?)")
    try:
        registry = Registry.open(path)
    except RegistryError as exc:
        raise AttachError(str(exc)) from None
    try:
        records = registry.all()
    finally:
        registry.close()
    by_id = [r for r in records if r.id == wanted]
    if by_id:
        return by_id[0]
    by_name = [r for r in records if r.name == wanted]
    if len(by_name) == 1:
        return by_name[0]
    if by_name:
        raise AttachError(
            f"{len(by_name)} sessions are named {wanted!r}; give an id: " + ", ".join(r.id for r in by_name)
        )
    raise AttachError(f"no session {wanted!r} in {state_dir}")


def attach_command(state_dir: Path, wanted: str, tmux: str = "tmux") -> list[str]:
    """The argv to exec, after checking that the session is a live tmux pane."""
    record = find_session(state_dir, wanted)
    if record.host_kind != "tmux":
        raise AttachError(
            f"session {record.id} runs on the {record.host_kind} host; attach needs the tmux host "
            "(start `panewatch serve --pane-host tmux`, then create the session again)"
        )
    reason = tmux_usable(tmux)
    if reason:
        raise AttachError(reason)
    if not socket_path(state_dir).exists():
        raise AttachError(f"no tmux server for {state_dir}: session {record.id} is lost (Resume it from the dashboard)")
    return attach_argv(state_dir, record.id, tmux)


def exec_attach(state_dir: Path, wanted: str) -> None:
    """Replace this process with ``tmux attach`` (never returns unless it raises)."""
    argv = attach_command(state_dir, wanted)
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}  # attach from inside tmux too
    os.execvpe(argv[0], argv, env)
