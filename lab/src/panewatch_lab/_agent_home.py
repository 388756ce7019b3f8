"""What every lab HOME shares: config files written into it, and the environment a CLI runs in.

The ``*_env`` modules keep only what is their own CLI's (its files' contents, its variables); the
environment all of them start from is built here once, so a change to it reaches every agent.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

#: The variables of the lab's own environment a CLI inherits (the rest would leak the host's).
INHERITED = ("PATH", "LANG", "LC_ALL")

#: ``XDG_*_HOME`` by the kind of directory, relative to HOME (the XDG defaults, made explicit).
_XDG = {
    "config": ("XDG_CONFIG_HOME", (".config",)),
    "data": ("XDG_DATA_HOME", (".local", "share")),
    "cache": ("XDG_CACHE_HOME", (".cache",)),
    "state": ("XDG_STATE_HOME", (".local", "state")),
}


def write_file(path: Path, text: str) -> None:
    """Write one config file of a HOME, making its folder first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def write_json(path: Path, data: object) -> None:
    """Write a JSON config file the way the CLIs themselves save it (indented)."""
    write_file(path, json.dumps(data, indent=2))


def xdg_dirs(home: Path, *kinds: str) -> dict[str, str]:
    """``XDG_<KIND>_HOME`` inside ``home`` for each kind named (``config``, ``data``, ``cache``, ``state``)."""
    return {_XDG[kind][0]: str(home.joinpath(*_XDG[kind][1])) for kind in kinds}


def agent_env(
    home: Path, extra: Mapping[str, str], *, tmpdir: bool = True, inherit: tuple[str, ...] = INHERITED
) -> dict[str, str]:
    """The environment of a CLI whose HOME is ``home``: the inherited variables, HOME, a TMPDIR
    inside it (made here; ``tmpdir=False`` for none), a colour terminal, then ``extra``."""
    env = {k: v for k, v in os.environ.items() if k in inherit and v}
    env["HOME"] = str(home)
    if tmpdir:
        tmp = home / "tmp"
        tmp.mkdir(exist_ok=True)
        env["TMPDIR"] = str(tmp)
    env.update({"TERM": "xterm-256color", "COLORTERM": "truecolor", **extra})
    env.setdefault("LANG", "C.UTF-8")
    return env
