"""The tmux host: agents live in a private tmux server and outlive Panewatch.

One tmux server per Panewatch instance, on its own socket in the state folder. Every agent gets
its own tmux session holding one window (so ``tmux attach -t SESSION`` shows just that agent),
and that window is also linked into one hidden session, ``_panewatch``, to which exactly **one**
control-mode client (``tmux -C``) is attached: tmux sends every pane's output over it as
``%output`` lines and answers commands in ``%begin``/``%end`` blocks, in one ordered stream. No
tmux command is forked per pane per sweep: output is pushed, the foreground process group comes
from ``/proc/<pane pid>/stat``, and an agent's exit is seen through a pidfd on its pid.

Input goes through a paste buffer written with octal escapes and pasted raw (``paste-buffer -r``),
so the agent gets exactly the bytes the engine chose (NUL through ``send-keys -H 00``).

A pane's command is a launch script in the state folder (``launch/``, 0600, deleted by its first
line): the agent's environment and argv would pass tmux's command length limit (~16 KB) on the
command line. The script joins the pane's cgroup (where the server may make one: then even an
``env -i setsid`` double-fork dies with the pane) and execs the agent, in its sandbox when the host
has one (``panewatch.procs.sandbox``; ``spawn`` wraps the argv, the one place this host does).
"""

from ._control import CommandFailed, ControlClient
from ._host import TmuxHost
from ._kill import cgroup_name, folder_tag, kill_tree, pane_marker, tree_members
from ._pane import TmuxPane, seed_bytes
from ._protocol import (
    CONTROL_SESSION,
    INFO_FORMAT,
    MIN_VERSION,
    PaneInfo,
    TmuxError,
    attach_argv,
    quote,
    socket_path,
    tmux_usable,
    tmux_version,
    unescape,
)

__all__ = [
    "CONTROL_SESSION",
    "INFO_FORMAT",
    "MIN_VERSION",
    "CommandFailed",
    "ControlClient",
    "PaneInfo",
    "TmuxError",
    "TmuxHost",
    "TmuxPane",
    "attach_argv",
    "cgroup_name",
    "folder_tag",
    "kill_tree",
    "pane_marker",
    "quote",
    "seed_bytes",
    "socket_path",
    "tmux_usable",
    "tmux_version",
    "tree_members",
    "unescape",
]
