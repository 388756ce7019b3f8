"""What the process table says about a pane: which program holds its terminal.

The kernel cannot tell "waiting for you" from "waiting for the network" for an event-loop
agent (both sleep in epoll), but it does tell which program is in the foreground: ``claude``
typed by hand into a shell pane, or the shell back in charge after the agent exited.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

#: Interpreters whose script name is the program a user thinks of (``node /usr/bin/gemini``).
INTERPRETERS = {"node", "nodejs", "bun", "deno", "python", "python3", "ruby", "perl"}
for _v in range(8, 15):
    INTERPRETERS.add(f"python3.{_v}")

SHELLS = {"bash", "zsh", "sh", "dash", "fish", "ksh", "tcsh", "csh", "nu", "xonsh"}


@dataclass(frozen=True)
class Program:
    pid: int
    name: str  # the program a user would name: "claude", "bash", "gemini"
    comm: str  # the kernel's short name


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def program_name(pid: int) -> Program | None:
    """Name the program running as ``pid``, looking through interpreters to their script."""
    comm_raw = _read(f"/proc/{pid}/comm")
    if comm_raw is None:
        return None
    comm = comm_raw.decode(errors="replace").strip()
    cmdline = _read(f"/proc/{pid}/cmdline") or b""
    argv = [a.decode(errors="replace") for a in cmdline.split(b"\0") if a]
    exe = os.path.basename(argv[0]).lstrip("-") if argv else ""
    name = comm
    if comm in INTERPRETERS:  # a renamed process (prctl) keeps the name it chose
        args = iter(argv[1:])
        for arg in args:
            if arg == "-c":
                break  # inline code: the interpreter is the program
            if arg == "-m":
                name = next(args, comm).rsplit(".", 1)[-1]
                break
            if not arg.startswith("-"):
                name = os.path.basename(arg)
                for ext in (".js", ".mjs", ".cjs", ".py"):
                    name = name.removesuffix(ext)
                break
    elif len(comm) == 15 and exe.startswith(comm):
        name = exe  # the kernel keeps 15 characters of the name
    return Program(pid, name, comm)


def is_shell(name: str | None) -> bool:
    return name is not None and os.path.basename(name) in SHELLS
