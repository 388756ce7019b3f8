"""The options an agent CLI's own ``--help`` lists, and how many words each takes.

The manifests' ``[resume]`` tables say how a launch's words read (which options take the next
word, which take several, which none), so that resume keeps every flag and leaves out the prompt.
That data is only as good as its match with the CLI: ``tests/test_resume_cli.py`` reads the pinned
CLIs' help with this and compares. Four help formats: Commander (Claude Code, Cline), clap (Codex,
Copilot CLI), yargs (Gemini CLI, Qwen Code, opencode) and Python's click (gptme).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

#: An option line: two to six spaces, then the names (``-r, --resume``), then maybe the value's
#: placeholder (``<v>``, ``[v]``, ``<v...>``, clap's ``<V>...``, ``[<v>]`` and ``[<v>...]``). Description lines are indented
#: further (a Commander description that wraps may start with ``--`` at column 40: not an option).
_OPTION = re.compile(
    r"^ {2,6}(?P<names>-[^\s,]+(?:, -[^\s,]+)*)"
    r"(?: (?P<arg>\[<[^>\]]*>(?:\.\.\.)?\]|[<\[][^>\]]*[>\]](?:\.\.\.)?))?(?:\s|$)"
)
_YARGS_TYPE = re.compile(r"\[(boolean|string|array|number|count)\]")


@dataclass(frozen=True)
class Options:
    """Every option of one help text by how it reads its value."""

    value: frozenset[str]  # the next word, always
    optional: frozenset[str]  # the next word unless it starts with "-"
    variadic: frozenset[str]  # every next word up to one starting with "-"
    flags: frozenset[str]  # none

    def every(self) -> frozenset[str]:
        return self.value | self.optional | self.variadic | self.flags


def _arity_of_placeholder(arg: str | None) -> str:
    if not arg:
        return "flags"
    if arg.endswith("...") or arg.endswith("...>") or arg.endswith("...]"):
        return "variadic"
    return "optional" if arg.startswith("[") else "value"


def parse_help(text: str) -> Options:
    """The options of a Commander, clap or yargs help text (yargs: by its ``[type]`` column)."""
    found: dict[str, set[str]] = {"value": set(), "optional": set(), "variadic": set(), "flags": set()}
    lines = text.splitlines()
    for at, line in enumerate(lines):
        match = _OPTION.match(line)
        if match is None:
            continue
        names = [n for n in match["names"].split(", ")]
        typed = _YARGS_TYPE.search(line)
        after = lines[at + 1] if at + 1 < len(lines) else ""
        if typed is None and _OPTION.match(after) is None:
            # yargs puts the type on the next line when the description fills the first
            # (opencode's ``--mdns-domain``)
            typed = _YARGS_TYPE.search(after)
        if typed is not None and match["arg"] is None:
            # yargs: a string takes the next word unless it is an option (``-w`` alone is allowed)
            kind = {"boolean": "flags", "count": "flags", "array": "variadic"}.get(typed[1], "optional")
        else:
            kind = _arity_of_placeholder(match["arg"])
        found[kind].update(names)
    return Options(*(frozenset(found[k]) for k in ("value", "optional", "variadic", "flags")))


#: A click option line: two spaces, the names (``-m, --model``; a flag pair ``--stream /
#: --no-stream``), then an upper-case metavar (``TEXT``, ``DIRECTORY``) or a choice (``[text|json]``),
#: either of which takes the next word; no metavar: a flag.
_CLICK_OPTION = re.compile(r"^  (?P<names>-[\w-]+(?:(?:, | / )-[\w-]+)*)(?: (?P<arg>[A-Z][A-Z_]*|\[[^\]]*\]))?(?:\s|$)")


def parse_click_help(text: str) -> Options:
    """The options of a click help text."""
    value: set[str] = set()
    flags: set[str] = set()
    for line in text.splitlines():
        match = _CLICK_OPTION.match(line)
        if match is not None:
            (value if match["arg"] else flags).update(re.split(r", | / ", match["names"]))
    return Options(frozenset(value), frozenset(), frozenset(), frozenset(flags))


def cli_help(binary: str, *args: str) -> str:
    """``binary *args --help`` (stdout and stderr: some CLIs print help on either)."""
    done = subprocess.run([binary, *args, "--help"], capture_output=True, text=True, timeout=120, check=False)
    return done.stdout + done.stderr


def options_of(binary: str, args: Sequence[str] = (), *, click: bool = False) -> Options:
    text = cli_help(binary, *args)
    return parse_click_help(text) if click else parse_help(text)
