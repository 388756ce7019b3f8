"""Scenarios for the Codex, Gemini and Aider mocks: which reply answers which typed task.

The three CLIs speak three wire formats (OpenAI Responses, Gemini ``streamGenerateContent``,
OpenAI chat completions) but the lab drives them the same way: type ``task:<name>`` and the
mock answers with that step's text or shell call, paced so that the screens the captures need
(thinking, a tool running, an approval) stay up long enough to be seen. The conversation
carries the state (last user text, or a tool result), so the mock keeps no session.

Every request and reply is logged as a JSON line (``request`` / ``first_token`` / ``reply``)
with the same fields for every wire format: that log is the ground truth the captures and
the live tests compare the screen against.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from panewatch_lab.bundled import load_toml

SCENARIO_DIR = Path(__file__).with_name("scenarios")


class AgentStep(BaseModel):
    """One reply: after ``ttft`` seconds, ``text`` in chunks, or a shell command to run."""

    model_config = ConfigDict(extra="forbid")

    id: str
    task: str = ".*"  # regex on the user's last typed text
    after: Literal["user", "tool"] = "user"
    ttft: float = Field(default=0.05, ge=0, le=60)
    text: str = ""
    #: A shell command the model asks to run (Codex: with escalation, so it asks for approval).
    shell: str | None = None
    #: Codex only: run the command inside the sandbox (no approval) instead of escalating.
    sandboxed: bool = False
    #: A file the model writes (Gemini ``write_file``; Aider: a whole-file edit block).
    write: dict[str, str] | None = None
    chunk_chars: int = Field(default=24, ge=1)
    chunk_delay: float = Field(default=0.02, ge=0)

    @field_validator("task")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"bad regex {value!r}: {exc}") from None
        return value

    @property
    def stop_reason(self) -> str:
        return "tool_use" if (self.shell or self.write) else "end_turn"

    def chunks(self) -> list[str]:
        text = self.text
        return [text[i : i + self.chunk_chars] for i in range(0, len(text), self.chunk_chars)] or []


class AgentScenario(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str = ""
    steps: list[AgentStep] = Field(default_factory=list)
    fallback: AgentStep = Field(default_factory=lambda: AgentStep(id="fallback", text="OK."))

    def choose(self, task: str, after: str) -> AgentStep:
        for step in self.steps:
            if step.after == after and re.search(step.task, task):
                return step
        if after == "tool":
            return AgentStep(id="tool-done", text="Done.")
        return self.fallback


def load_agent_scenario(ref: str | Path | None = None) -> AgentScenario:
    """A scenario from a path, or by bare name from ``lab/scenarios/`` (default ``agents``)."""
    return AgentScenario.model_validate(load_toml(ref, SCENARIO_DIR, "agents"))


@dataclass(frozen=True)
class Turn:
    """What the log says about the last main request: the state a capture label is checked on.

    ``none`` no request yet; ``waiting`` sent, no token yet; ``streaming`` tokens flowing;
    ``tool`` the reply asked for a tool and no later request came (asking or running it);
    ``done`` the turn ended; ``cancelled`` the CLI hung up mid-reply (Esc).
    """

    state: str
    step: str | None
    ended: float | None
    requests: int


def last_turn(records: list[dict[str, Any]]) -> Turn:
    main = [r for r in records if r["event"] == "request" and r.get("kind") == "main"]
    if not main:
        return Turn("none", None, None, 0)
    last = main[-1]
    rid, step = last["id"], last.get("step")
    reply = next((r for r in records if r["event"] == "reply" and r.get("id") == rid), None)
    if reply is None:
        started = any(r["event"] == "first_token" and r.get("id") == rid for r in records)
        return Turn("streaming" if started else "waiting", step, None, len(main))
    if reply.get("status") == "cancelled":
        return Turn("cancelled", step, reply["mono"], len(main))
    return Turn("tool" if reply.get("stop_reason") == "tool_use" else "done", step, reply["mono"], len(main))


_INJECTED = re.compile(r"^\s*<")


def content_texts(content: Any) -> list[str]:
    """The text parts of an OpenAI-style message content: one string, or a list of parts."""
    if isinstance(content, str):
        return [content]
    return [c.get("text", "") for c in content or [] if isinstance(c, dict)]


def typed_text(texts: list[str]) -> str:
    """The user's own words among a message's text parts (the CLIs inject ``<context>`` blocks)."""
    own = [t for t in texts if t and not _INJECTED.match(t)]
    return own[-1] if own else (texts[-1] if texts else "")


def schema_value(schema: Any, depth: int = 0) -> Any:
    """A value valid for a JSON schema (side requests ask for structured JSON)."""
    if not isinstance(schema, dict) or depth > 6:
        return "mock"
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    kind = str(kind or "object").lower()
    if kind == "object":
        props = schema.get("properties") or {}
        return {k: schema_value(v, depth + 1) for k, v in props.items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        low = schema.get("minimum", 1)
        return low if isinstance(low, (int, float)) else 1
    if kind == "boolean":
        return False
    return "mock"
