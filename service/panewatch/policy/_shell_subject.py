"""A shell command as the policy matches it: one simple command's words, or the reason it is
not provably simple.

A pattern written for ``ls`` must never approve ``ls; rm -rf ~`` or ``ls $(curl …)``, so the
command is parsed by a real shell grammar (bashlex) and anything but one plain command of plain
words is refused: lists (``;``, ``&&``, ``||``, ``&``), pipes, compound commands, substitutions,
expansions, redirections, assignments, globs and escapes. Refusal is the safe answer (a person
decides); a rule may opt out with ``allow_compound``.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

import bashlex

__all__ = ["ShellSubject", "parse_command"]

#: Characters a shell gives a meaning to outside quotes, within a word (globs, expansions, escapes).
SPECIAL = frozenset("*?[]{}~$`\\!")


@dataclass(frozen=True)
class ShellSubject:
    """A parsed command: ``words`` when it is one simple command, else why not (``refused``)."""

    text: str
    words: tuple[str, ...] = ()
    refused: str | None = None

    @property
    def simple(self) -> bool:
        return self.refused is None

    @property
    def canonical(self) -> str:
        """The words quoted back, one space apart: what a simple command's rule is matched against."""
        return shlex.join(self.words)


def _unquoted_special(raw: str) -> str | None:
    """The first character of ``raw`` (one word's source) that the shell would expand."""
    quote = ""
    for ch in raw:
        if quote:
            if ch == quote:
                quote = ""
            elif quote == '"' and ch in "$`\\":
                return ch
        elif ch in "'\"":
            quote = ch
        elif ch in SPECIAL:
            return ch
    return None


def parse_command(text: str) -> ShellSubject:
    """``text`` parsed as a shell command line: simple (its words) or refused with the reason."""
    line = text.strip()
    if not line:
        return ShellSubject(text, refused="an empty command")
    if any(ord(ch) < 32 and ch != "\t" for ch in line):
        return ShellSubject(text, refused="more than one line, or control characters")
    try:
        trees = bashlex.parse(line)
    except Exception as exc:  # bashlex raises its own errors and, on odd input, others
        return ShellSubject(text, refused=f"the shell grammar cannot parse it ({type(exc).__name__})")
    if len(trees) != 1 or trees[0].kind != "command":
        kind = trees[0].kind if len(trees) == 1 else "several commands"
        return ShellSubject(text, refused=f"not one simple command ({kind})")
    words: list[str] = []
    for part in trees[0].parts:
        if part.kind != "word":
            return ShellSubject(text, refused=f"a {part.kind} is not simple")
        if part.parts:
            return ShellSubject(text, refused=f"a {part.parts[0].kind} is not simple")
        special = _unquoted_special(line[part.pos[0] : part.pos[1]])
        if special is not None:
            return ShellSubject(text, refused=f"{special!r} outside quotes is not simple")
        words.append(part.word)
    return ShellSubject(text, tuple(words))
