"""Scenario files for the mock API: which reply answers which point of a conversation.

A scenario is data (TOML under ``panewatch_lab/scenarios/``), so a new capture needs a new file, not
new code. Steps are tried in order and the first whose ``when`` fits the request answers it.
The conversation itself carries the state: the user's last typed text names the task, and a
trailing ``tool_result`` says which tool just ran, so the mock keeps no session of its own.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

SCENARIO_DIR = Path(__file__).with_name("scenarios")

#: Text blocks the CLI adds to a user turn that the user did not type.
_INJECTED = re.compile(r"^\s*(<(system-reminder|command-name|local-command|command-message)|\[Request interrupted)")
_CWD = re.compile(r"Primary working directory: (\S+)")
#: Plan mode tells the model where to write its plan (ExitPlanMode shows that file).
_PLAN_FILE = re.compile(r"(/\S*/\.claude/plans/[^\s`'\"]+?\.md)")


class Pacing(BaseModel):
    """How a reply is streamed: time to first token, then chunks of text or JSON."""

    model_config = ConfigDict(extra="forbid")

    ttft: float = 0.05
    chunk_chars: int = Field(default=24, ge=1)
    chunk_delay: float = 0.01
    ping_every: float = 0.5


class When(BaseModel):
    """Conditions on a request; every one that is set must hold."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["main", "side"] = "main"
    task: str | None = None  # regex on the user's last typed text
    after: str | None = None  # "user" or the name of the tool whose result ends the conversation
    result: str | None = None  # regex on that tool result's text
    error: bool | None = None  # whether that tool result is an error (e.g. permission denied)
    system: str | None = None  # regex on the system prompt (to tell side requests apart)

    @field_validator("task", "result", "system")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"bad regex {value!r}: {exc}") from None
        return value


class ToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    input: dict[str, Any] = Field(default_factory=dict)


class Step(BaseModel):
    """One reply: optional thinking, text, then tool calls (``stop_reason`` follows from them)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    when: When = Field(default_factory=When)
    thinking: str | None = None
    text: str = ""
    tools: list[ToolCall] = Field(default_factory=list)
    pacing: Pacing | None = None

    @property
    def stop_reason(self) -> str:
        return "tool_use" if self.tools else "end_turn"


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str = ""
    pacing: Pacing = Field(default_factory=Pacing)
    steps: list[Step] = Field(default_factory=list)
    #: Answer for a main request no step fits, so the CLI never waits on the mock.
    fallback: Step = Field(default_factory=lambda: Step(id="fallback", text="OK."))
    side_fallback: Step = Field(
        default_factory=lambda: Step(id="side-fallback", when=When(kind="side"), text="Mock reply")
    )

    def pacing_for(self, step: Step) -> Pacing:
        if step.pacing is None:
            return self.pacing
        merged = self.pacing.model_dump() | step.pacing.model_dump(exclude_unset=True)
        return Pacing(**merged)


def load_scenario(ref: str | Path | None) -> Scenario:
    """Load a scenario from a path, or by bare name from the bundled ``scenarios/`` folder."""
    if ref is None:
        ref = "basic"
    path = Path(ref)
    if not path.exists():
        path = SCENARIO_DIR / (f"{ref}.toml" if not str(ref).endswith(".toml") else str(ref))
    with path.open("rb") as fh:
        return Scenario.model_validate(tomllib.load(fh))


# -- reading a request ---------------------------------------------------------------------
class Conversation(BaseModel):
    """What the step conditions look at, extracted from a Messages API request body."""

    kind: Literal["main", "side"]
    task: str = ""
    after: str = "user"
    result: str = ""
    error: bool = False
    system: str = ""
    cwd: str = ""
    plan_file: str = ""


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _text_of(content: Any) -> str:
    return "\n".join(b.get("text", "") for b in _blocks(content) if b.get("type") == "text")


def _typed_text(message: dict[str, Any]) -> str | None:
    """The text a user typed in this message, or None (tool results, injected context only).

    After a denied tool call the CLI sends the rejection and the user's next words in one
    message, so typed text may follow ``tool_result`` blocks.
    """
    blocks = _blocks(message.get("content"))
    typed = [b.get("text", "") for b in blocks if b.get("type") == "text" and not _INJECTED.match(b.get("text", ""))]
    return typed[-1] if typed else None


def read_conversation(body: dict[str, Any]) -> Conversation:
    """Summarise a request: main agent turn or side request, task text, last tool result."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    system = body.get("system")
    system_text = system if isinstance(system, str) else _text_of(system)
    system_turns = [_text_of(m.get("content")) for m in messages if m.get("role") == "system"]
    everything = "\n".join([system_text, *system_turns])
    all_text = everything + "\n" + "\n".join(_text_of(m.get("content")) for m in messages)
    cwd_match = _CWD.search(everything) or _CWD.search(all_text)
    plan_matches = _PLAN_FILE.findall(all_text)
    conv = Conversation(
        kind="main" if body.get("tools") and body.get("stream") else "side",
        system=system_text,
        cwd=cwd_match.group(1) if cwd_match else "",
        plan_file=plan_matches[-1] if plan_matches else "",
    )
    users = [m for m in messages if m.get("role") == "user"]
    for message in reversed(users):
        typed = _typed_text(message)
        if typed is not None:
            conv.task = typed
            break
    if users:
        last = users[-1]
        results = [b for b in _blocks(last.get("content")) if b.get("type") == "tool_result"]
        if results and _typed_text(last) is None:
            res = results[-1]
            names = {
                b.get("id"): b.get("name")
                for m in messages
                if m.get("role") == "assistant"
                for b in _blocks(m.get("content"))
                if b.get("type") == "tool_use"
            }
            conv.after = names.get(res.get("tool_use_id")) or "unknown"
            content = res.get("content")
            conv.result = content if isinstance(content, str) else _text_of(content)
            conv.error = bool(res.get("is_error"))
    return conv


def matches(when: When, conv: Conversation) -> bool:
    if when.kind != conv.kind:
        return False
    if when.task is not None and not re.search(when.task, conv.task):
        return False
    if when.after is not None and when.after != conv.after:
        return False
    if when.result is not None and not re.search(when.result, conv.result):
        return False
    if when.error is not None and when.error != conv.error:
        return False
    return when.system is None or re.search(when.system, conv.system) is not None


def choose(scenario: Scenario, conv: Conversation) -> Step:
    """The first step that fits, else the fallback for that kind of request."""
    for step in scenario.steps:
        if matches(step.when, conv):
            return step
    return scenario.fallback if conv.kind == "main" else scenario.side_fallback


def fill(value: Any, conv: Conversation) -> Any:
    """Replace ``{cwd}`` and ``{plan_file}`` in tool inputs (the CLI wants absolute paths)."""
    if isinstance(value, str):
        return value.replace("{cwd}", conv.cwd or ".").replace("{plan_file}", conv.plan_file or "plan.md")
    if isinstance(value, list):
        return [fill(v, conv) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, conv) for k, v in value.items()}
    return value
