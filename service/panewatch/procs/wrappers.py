"""A session's command as wrappers in front and the agent's own argv behind them.

``sudo -u agent -- nice -n 5 claude --permission-mode plan`` is two wrappers and one agent. Two
things need that split: resume (it keeps the wrappers and the agent's flags and puts the
manifest's resume arguments in their place) and containment (the sandbox goes between a
user-switching wrapper and the agent: setuid does not work inside it). Which programs wrap and
how their options read is data (``wrappers.toml``), so a new one is a table row, not a release.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Launch", "Wrapper", "split_launch", "wrappers"]


class Wrapper(BaseModel):
    """One program that runs the command given after its own words."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    program: str
    switches_user: bool = False
    value_options: tuple[str, ...] = ()
    positionals: int = Field(default=0, ge=0, le=4)
    assignments: bool = False
    #: the wrapped command follows only when one of these options was given; without them the
    #: words are a user name and a shell string (``runuser agent -c '…'``): opaque
    command_needs: tuple[str, ...] = ()
    reason: str


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: str
    wrappers: list[Wrapper]


@cache
def wrappers() -> dict[str, Wrapper]:
    """The bundled table, by program name (read once; it ships with the package)."""
    text = resources.files(__package__).joinpath("wrappers.toml").read_text(encoding="utf-8")
    table = _Table.model_validate(tomllib.loads(text))
    return {w.program: w for w in table.wrappers}


@dataclass(frozen=True)
class Launch:
    """``argv`` split: ``prefix`` (the wrappers and their words) + ``agent`` (the program it runs,
    with its own flags). ``agent`` is empty when a wrapper's command could not be found."""

    prefix: tuple[str, ...]
    agent: tuple[str, ...]
    switches_user: bool

    @property
    def program(self) -> str:
        """The agent's program name (basename), "" when there is none."""
        return os.path.basename(self.agent[0]) if self.agent else ""

    def with_agent(self, agent: Sequence[str]) -> list[str]:
        """The same wrappers in front of another agent argv (a resume, a sandbox around it)."""
        return [*self.prefix, *agent]


def _cluster_wants_value(word: str, wrapper: Wrapper, given: set[str]) -> bool:
    """``-Eu`` is ``-E -u``: True when the cluster ends in an option whose value is the next word
    (``-uagent`` carries its value, so no)."""
    for at, letter in enumerate(word[1:], start=1):
        given.add(f"-{letter}")
        if f"-{letter}" in wrapper.value_options:
            return at == len(word) - 1
    return False


def _skip_wrapper_words(argv: Sequence[str], i: int, wrapper: Wrapper) -> int | None:
    """Index of the first word of the wrapped command, ``argv[i]`` being the wrapper; None when
    the words end before a command does (``sudo -l``, ``env`` alone)."""
    i += 1
    given: set[str] = set()
    while i < len(argv):
        word = argv[i]
        if word == "--":
            i += 1
            break
        if word.startswith("--"):
            name = word.split("=", 1)[0]
            given.add(name)
            i += 2 if name in wrapper.value_options and "=" not in word else 1
            continue
        if word.startswith("-") and word != "-":
            i += 2 if _cluster_wants_value(word, wrapper, given) else 1
            continue
        if wrapper.assignments and "=" in word and not word.startswith("="):
            i += 1
            continue
        break
    if wrapper.command_needs and not given.intersection(wrapper.command_needs):
        return None
    i += wrapper.positionals
    return i if i < len(argv) else None


def split_launch(argv: Sequence[str], table: dict[str, Wrapper] | None = None) -> Launch:
    """Peel every known wrapper off the front of ``argv``. A wrapper whose command cannot be
    found leaves the whole argv as the prefix and no agent: nothing can be put in its place."""
    known = wrappers() if table is None else table
    i, switches = 0, False
    while i < len(argv):
        wrapper = known.get(os.path.basename(argv[i]))
        if wrapper is None:
            break
        switches = switches or wrapper.switches_user
        nxt = _skip_wrapper_words(argv, i, wrapper)
        if nxt is None:
            return Launch(tuple(argv), (), switches)
        i = nxt
    return Launch(tuple(argv[:i]), tuple(argv[i:]), switches)
