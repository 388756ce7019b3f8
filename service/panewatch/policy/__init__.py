"""One approval policy for every agent, as data: a TOML file of rules, in order, first match wins.

A rule matches on the agent, the tool (in the policy's names: each manifest's ``tools`` table maps
the agent's own, such as Codex's ``exec`` or Gemini's ``run_shell_command``, to Claude's ``Bash``,
``Edit``, ``Write``), the subject (an RE2 pattern matched against the *whole* subject; a shell
command only when it is one simple command, see ``_shell_subject``) and the session's folder. Its
action: ``allow``, ``deny``, ``ask`` (a person decides: also what no rule matching means) or
``suggest`` (recorded and shown, a person still decides). Every rule says why (``reason``).

This module is pure: what the file says and what it decides for one request. Whether a request
may be trusted (a hook or ACP request the screen agrees with) and the guarded answer are the
engine's (``engine/_policy.py``). The file is re-read when it changes; a broken one is refused
with file, line and reason and the last good policy stays, as manifests do.
"""

from __future__ import annotations

import logging
import re
import tomllib
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..manifest import backtracking_hazard, compile_rule_pattern
from ._shell_subject import parse_command

__all__ = ["Asked", "PolicyAction", "PolicyError", "PolicyStore", "Ruling", "parse_policy"]

log = logging.getLogger("panewatch.policy")


class PolicyAction(StrEnum):
    """What a rule does with a request it matches."""

    allow = "allow"  # answer the option that approves once
    deny = "deny"  # answer the option that refuses
    ask = "ask"  # a person decides
    suggest = "suggest"  # a person decides; the page says what the policy would do


class PolicyRule(BaseModel):
    """One rule: what it matches (every field given must match), what it does and why."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    agent: str | None = Field(default=None, min_length=1, max_length=64)
    tool: str | None = Field(default=None, min_length=1, max_length=64)
    subject: str | None = None
    folder: str | None = Field(default=None, min_length=1)
    action: PolicyAction
    reason: str = Field(min_length=1, max_length=200)
    #: match a shell subject that is not one simple command (pipes, lists, substitutions) as text
    allow_compound: bool = False
    #: also act on a request read off the screen alone (agents without hooks, such as Aider)
    screen_only: bool = False
    #: an allow/deny rule that only says what it would do (as ``suggest``)
    dry_run: bool = False

    @field_validator("subject")
    @classmethod
    def _valid(cls, value: str | None) -> str | None:
        if value is not None:
            _anchored(value)
        return value

    @field_validator("folder")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError("a folder is an absolute path")
        return value


def _anchored(pattern: str) -> Any:
    """``pattern`` compiled to match a whole subject: on RE2 (linear time), or on ``re`` only
    when it has no backtracking hazard (as manifest patterns); a ``ValueError`` says why not."""
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"{pattern!r} is not a valid regex: {exc}") from None
    compiled = compile_rule_pattern(rf"\A(?:{pattern})\Z", 0)
    if getattr(compiled, "engine", "re") != "re2" and (hazard := backtracking_hazard(pattern)):
        raise ValueError(f"{pattern!r} is refused: {hazard} (and RE2 cannot run it)")
    return compiled


class PolicyFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    rules: list[PolicyRule] = []

    @model_validator(mode="after")
    def _unique_ids(self) -> PolicyFile:
        ids = [r.id for r in self.rules if r.id]
        if len(ids) != len(set(ids)):
            raise ValueError(f"rule ids repeat: {sorted({i for i in ids if ids.count(i) > 1})}")
        return self


class PolicyError(Exception):
    """A policy file that was refused, with where and why."""

    def __init__(self, path: Path | str, reason: str, line: int | None = None) -> None:
        self.path, self.reason, self.line = Path(path), reason, line
        super().__init__(f"{self.path}:{line}: {reason}" if line else f"{self.path}: {reason}")

    def as_dict(self) -> dict[str, object]:
        return {"file": str(self.path), "line": self.line, "reason": self.reason}


def _rule_line(source: str, index: int, key: str | None) -> int | None:
    """The line of the ``index``-th ``[[rules]]`` header, or of ``key =`` inside it."""
    seen, header = -1, None
    for number, line in enumerate(source.splitlines(), 1):
        text = line.strip()
        if text == "[[rules]]":
            seen += 1
            if seen == index:
                header = number
            elif header is not None:
                return header
        elif header is not None and key and text.split("=", 1)[0].strip() == key:
            return number
    return header


def parse_policy(path: Path, source: str | None = None) -> PolicyFile:
    """Read and validate a policy file, or raise ``PolicyError`` saying where and why."""
    try:
        source = path.read_text(encoding="utf-8") if source is None else source
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError(path, f"cannot read: {exc}") from None
    try:
        data = tomllib.loads(source)
    except tomllib.TOMLDecodeError as exc:
        at = re.search(r"at line (\d+)", str(exc))  # (Python 3.11's error has no ``lineno``)
        line = int(at.group(1)) if at else None
        raise PolicyError(path, f"TOML syntax: {exc}", line) from None
    try:
        return PolicyFile.model_validate(data)
    except ValidationError as exc:
        # a misspelt key is the cause of the "missing" one beside it: it is said first
        err = min(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
        loc = err["loc"]
        where = ".".join(str(p) for p in loc)
        line = None
        if len(loc) >= 2 and loc[0] == "rules" and isinstance(loc[1], int):
            line = _rule_line(source, loc[1], str(loc[2]) if len(loc) > 2 else None)
            where = f"rule {loc[1] + 1}" + (f" {'.'.join(str(p) for p in loc[2:])}" if len(loc) > 2 else "")
        raise PolicyError(path, f"{where}: {err['msg']}" if where else err["msg"], line) from None


@dataclass(frozen=True)
class Asked:
    """One blocked request as the policy sees it. ``trusted``: a structured request (hook, ACP)
    that the screen's own prompt agrees with; anything else is screen text alone."""

    agent: str
    tool: str | None  # in the policy's names (the manifest's ``tools`` applied)
    subject: str | None
    subject_kind: str | None
    folder: str
    trusted: bool


@dataclass(frozen=True)
class Ruling:
    """What the policy decided for one request: the action, the rule (None: no rule matched)
    and why, in words a person reads on the page and in the ledger."""

    action: PolicyAction
    rule: str | None
    reason: str
    #: What the rule would have done (allow or deny) where it did not act: a dry run, a request
    #: not confirmed as the agent's own, a paused policy: the page says "the policy would allow this".
    would: PolicyAction | None = None

    def held(self, reason: str) -> Ruling:
        """This ruling left to a person (``ask``), saying why, and what it would have done."""
        would = self.action if self.acts else self.would
        return Ruling(PolicyAction.ask, self.rule, reason, would)

    @property
    def acts(self) -> bool:
        return self.action in (PolicyAction.allow, PolicyAction.deny)


NO_RULE = Ruling(PolicyAction.ask, None, "no policy rule matches: a person decides")


def _in_folder(folder: str, cwd: str) -> bool:
    base = folder.rstrip("/") or "/"
    return cwd == base or cwd.startswith(base if base.endswith("/") else base + "/")


@dataclass(frozen=True)
class _Compiled:
    rule: PolicyRule
    rid: str
    pattern: Any  # the subject's pattern, anchored at both ends (RE2 where it can be)

    def matches(self, asked: Asked) -> bool:
        r = self.rule
        if r.agent is not None and r.agent != asked.agent:
            return False
        if r.tool is not None and r.tool != asked.tool:
            return False
        if r.folder is not None and not _in_folder(r.folder, asked.folder):
            return False
        if self.pattern is None:
            return True
        if asked.subject is None:
            return False
        text = asked.subject
        if asked.subject_kind == "command":
            parsed = parse_command(text)
            if not parsed.simple and not r.allow_compound:
                return False
            text = parsed.canonical if parsed.simple else text.strip()
        return self.pattern.search(text) is not None


@dataclass(frozen=True)
class Policy:
    """A validated policy, its patterns compiled; ``decide`` is its one question."""

    rules: tuple[_Compiled, ...] = ()

    @classmethod
    def build(cls, parsed: PolicyFile) -> Policy:
        compiled = []
        for i, rule in enumerate(parsed.rules, 1):
            pattern = None if rule.subject is None else _anchored(rule.subject)
            compiled.append(_Compiled(rule, rule.id or f"rule-{i}", pattern))
        return cls(tuple(compiled))

    def decide(self, asked: Asked) -> Ruling:
        """The first rule that matches decides; a rule that would act on screen text alone
        does not, unless it says ``screen_only``."""
        for c in self.rules:
            if not c.matches(asked):
                continue
            rule = c.rule
            if rule.dry_run and rule.action in ("allow", "deny"):
                return Ruling(PolicyAction.suggest, c.rid, rule.reason, PolicyAction(rule.action))
            action = PolicyAction(rule.action)
            if action in (PolicyAction.allow, PolicyAction.deny) and not asked.trusted and not rule.screen_only:
                why = f"rule {c.rid} would {rule.action} ({rule.reason}), but the request is not the agent's own"
                return Ruling(PolicyAction.ask, c.rid, why + " request confirmed by the screen", action)
            return Ruling(action, c.rid, rule.reason)
        return NO_RULE

    def described(self) -> list[dict[str, Any]]:
        """The rules as ``GET /api/policy`` shows them (screen-only ones marked)."""
        return [{"id": c.rid, **c.rule.model_dump(mode="json", exclude={"id"})} for c in self.rules]


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


@dataclass
class PolicyStore:
    """The policy in force, from one file (None: no policy, every request asks a person).

    ``reload_if_changed`` (off the event loop: it reads a file) re-reads it when its mtime moved;
    a refused file leaves the last good policy in force and its error in ``error``. ``paused``
    is the kill switch: nothing is answered while it is on (decisions are still recorded)."""

    path: Path | None = None
    policy: Policy = field(default_factory=Policy)
    error: PolicyError | None = None
    paused: bool = False
    loaded_at_mtime: int = -1
    generation: int = 0
    counts: dict[str, int] = field(default_factory=lambda: {str(a): 0 for a in PolicyAction})

    @classmethod
    def from_file(cls, path: Path | str | None) -> PolicyStore:
        store = cls(Path(path) if path else None)
        store.reload_if_changed()
        return store

    def reload_if_changed(self) -> PolicyError | None:
        """Re-read a changed file; the error of this pass (None: loaded, or unchanged)."""
        if self.path is None:
            return None
        mtime = _mtime(self.path)
        if mtime == self.loaded_at_mtime:
            return None
        self.loaded_at_mtime = mtime
        try:
            policy = Policy.build(parse_policy(self.path))
        except PolicyError as exc:
            self.error = exc
            log.warning("policy refused, the last good one stays: %s", exc)
            return exc
        self.policy, self.error = policy, None
        self.generation += 1
        log.info("policy loaded from %s: %d rules", self.path, len(policy.rules))
        return None

    def set_paused(self, paused: bool, by: str) -> None:
        """The kill switch (``by``: who, for the log line)."""
        if paused != self.paused:
            log.warning("policy %s by %s", "paused" if paused else "resumed", by)
        self.paused = paused

    def decide(self, asked: Asked) -> Ruling:
        return self.policy.decide(asked)

    def record(self, ruling: Ruling) -> None:
        """Count a decision as it was carried out (a paused allow counts as the ask it became)."""
        self.counts[str(ruling.action)] += 1

    def status(self) -> dict[str, Any]:
        """``GET /api/policy``: the file, whether it is paused, its refusal, the rules in force."""
        return {
            "file": str(self.path) if self.path else None,
            "paused": self.paused,
            "error": self.error.as_dict() if self.error else None,
            "generation": self.generation,
            "rules": self.policy.described(),
            "decisions": dict(self.counts),
        }
