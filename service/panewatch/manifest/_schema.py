"""A manifest's schema: what one TOML file may say (pydantic), and the error that refuses one."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..procs.resume import ResumeSpec
from ..states import RULE_STATES, State
from ._regex import backtracking_hazard, checked_pattern
from ._regions import REGION, REGIONS_HELP


class TextRead(BaseModel):
    """Where a piece of a request stands in the rule's region: group 1 (or the whole match) of
    the first line matching ``line``; or the non-empty lines after the first line matching
    ``after``, up to a line matching ``until`` (without ``until``: one line). ``tool``: only
    when the tool read off the same screen is that one."""

    model_config = ConfigDict(extra="forbid")

    line: str | None = None
    after: str | None = None
    until: str | None = None
    tool: str | None = Field(default=None, max_length=64)

    @field_validator("line", "after", "until")
    @classmethod
    def _valid(cls, value: str | None) -> str | None:
        return None if value is None else checked_pattern(value)

    @model_validator(mode="after")
    def _one_way(self) -> TextRead:
        if (self.line is None) == (self.after is None):
            raise ValueError("give exactly one of `line` and `after`")
        if self.until is not None and self.after is None:
            raise ValueError("`until` goes with `after`")
        return self


class SubjectRead(TextRead):
    """The thing a request is about, and what kind of thing it is."""

    kind: Literal["command", "path", "url"]


class ToolRead(BaseModel):
    """The tool a request names when a line of the region matches ``line``."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=64)
    line: str

    @field_validator("line")
    @classmethod
    def _valid(cls, value: str) -> str:
        return checked_pattern(value)


class RequestRead(BaseModel):
    """How a blocked rule's screen says what is asked (the first read that finds text wins):
    the question, the tool, the subject (a command, path or URL) and a detail line. ``region``
    defaults to the rule's own."""

    model_config = ConfigDict(extra="forbid")

    region: str | None = None
    question: list[TextRead] = []
    tools: list[ToolRead] = []
    subjects: list[SubjectRead] = []
    detail: list[TextRead] = []
    #: The options the approval policy answers (searched in each option's label): the one that
    #: approves this request once, and the one that refuses it.
    approve_once: str | None = None
    refuse: str | None = None
    #: After the refusing option, the agent waits for the user's words (Codex's "No, and tell
    #: Codex what to do differently"): a policy ``deny`` types its rule's reason there.
    tell_why: bool = False

    @field_validator("approve_once", "refuse")
    @classmethod
    def _valid_option(cls, value: str | None) -> str | None:
        return None if value is None else checked_pattern(value)

    @field_validator("region")
    @classmethod
    def _known_region(cls, value: str | None) -> str | None:
        if value is not None and not REGION.match(value):
            raise ValueError(f"unknown region {value!r}; known: {REGIONS_HELP}")
        return value


class Rule(BaseModel):
    """One screen rule: regexes searched in a region of the visible screen."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    state: State  # one of ``RULE_STATES``: exited and lost come from the process
    why: str = Field(min_length=1)
    region: str = "screen"
    #: Keep only the last N non-empty lines of the region.
    last: int | None = Field(default=None, ge=1)
    any: list[str] = []
    all: list[str] = []
    not_: list[str] = Field(default=[], alias="not")
    ignore_case: bool = False
    #: What a blocked rule's screen asks (``[rules.request]``): read for ``request`` in the API.
    request: RequestRead | None = None

    @field_validator("state")
    @classmethod
    def _rule_state(cls, value: State) -> State:
        if value not in RULE_STATES:
            raise ValueError(f"a rule gives blocked, working or idle, not {value} (that comes from the process)")
        return value

    @field_validator("region")
    @classmethod
    def _known_region(cls, value: str) -> str:
        if not REGION.match(value):
            raise ValueError(f"unknown region {value!r}; known: {REGIONS_HELP}")
        return value

    @field_validator("any", "all", "not_")
    @classmethod
    def _valid_regexes(cls, patterns: list[str]) -> list[str]:
        for i, pattern in enumerate(patterns):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"pattern {i + 1} {pattern!r} is not a valid regex: {exc}") from None
            hazard = backtracking_hazard(pattern)
            if hazard:
                raise ValueError(f"pattern {i + 1} {pattern!r} is refused: {hazard}")
        return patterns

    @model_validator(mode="after")
    def _has_patterns(self) -> Rule:
        if not self.any and not self.all:
            raise ValueError("a rule needs at least one pattern in `any` or `all`")
        if self.request is not None and self.state != "blocked":
            raise ValueError("only a blocked rule says what is asked (`request`)")
        return self


class Manifest(BaseModel):
    """What Panewatch knows about one agent CLI."""

    model_config = ConfigDict(extra="forbid")

    agent: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    version: str
    description: str = ""
    #: Take the rules of another manifest, after this file's own.
    extends: str | None = None
    #: The agent's tool names in the approval policy's (Claude's): ``exec = "Bash"``.
    tools: dict[str, str] = {}
    #: Program names (``/proc/PID/comm`` or argv[0] basename) that identify this agent.
    processes: list[str] = []
    #: Launch command when a session names the agent but gives no command.
    command: list[str] = []
    #: How the agent's conversation is resumed after its pane was lost (a killed tmux, a reboot):
    #: a ``[resume]`` table (the arguments put into the launched command, and how its options
    #: read), or the older whole command as a list; ``{agent_session_id}`` is the id the agent's
    #: hooks reported. Empty: not resumable.
    resume: ResumeSpec | list[str] = []
    #: Which hook integration the launcher may add (``claude``: ``--settings``; ``codex``: ``-c``
    #: overrides; ``gemini``: an overlay settings folder; ``qwen``: a system-defaults file; ``cline``: an
    #: overlay ``CLINE_DIR``; ``opencode``: a plugin; ``copilot``: ``--plugin-dir``; ``gptme``: a plugin on ``PYTHONPATH``), and whose
    #: payloads the reports are.
    hooks: Literal["claude", "codex", "gemini", "qwen", "cline", "opencode", "copilot", "gptme"] | None = None
    #: Keys that pick option ``{n}`` of a prompt (Claude's menus take the digit alone).
    option_keys: str = Field(default="{n}", pattern=r"\{n\}")
    #: Seconds after launch during which a screen no rule matches reads ``working`` (source
    #: ``start``), not ``idle``: the agent has not drawn anything this manifest knows yet.
    #: 0 turns it off (a blank screen is idle at once, as for a plain shell).
    startup_timeout: float = Field(default=0.0, ge=0, le=120)
    rules: Annotated[list[Rule], Field(default=[])]

    @field_validator("resume")
    @classmethod
    def _resume_has_id(cls, value: ResumeSpec | list[str]) -> ResumeSpec | list[str]:
        if isinstance(value, list) and value and not any("{agent_session_id}" in part for part in value):
            raise ValueError("resume must contain {agent_session_id} (the conversation to resume)")
        return value

    @model_validator(mode="after")
    def _unique_rule_names(self) -> Manifest:
        seen: set[str] = set()
        for rule in self.rules:
            if rule.name in seen:
                raise ValueError(f"rule name {rule.name!r} is used twice")
            seen.add(rule.name)
        return self


class ManifestError(Exception):
    """A manifest that was refused, with where and why."""

    def __init__(self, path: Path | str, reason: str, line: int | None = None, rule: int | None = None):
        self.path, self.reason, self.line, self.rule = Path(path), reason, line, rule
        where = f"{self.path}:{line}" if line else str(self.path)
        which = f" rule {rule}" if rule else ""
        super().__init__(f"{where}:{which} {reason}")

    def as_dict(self) -> dict[str, object]:
        return {"file": str(self.path), "line": self.line, "rule": self.rule, "reason": self.reason}
