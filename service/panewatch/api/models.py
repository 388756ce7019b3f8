"""Request bodies, validated before any route runs (a bad one is a 422 with the field).

Text fields use ``validation``'s types: what the OS or a UTF-8 answer cannot carry (NUL, lone
surrogates, '=' in an environment name) is refused here, before any session exists."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..validation import AgentName, EnvKey, OsPath, OsString, Utf8Text


class NewSession(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["terminal", "acp"] = Field(
        "terminal",
        description="terminal: an agent read from its screen; "
        "acp: an agent speaking the Agent Client Protocol on stdio",
    )
    agent: AgentName | None = Field(
        None,
        description="manifest name (terminal) or ACP agent name (acp); gives the "
        "launch command when `command` is absent",
    )
    command: list[OsString] | None = Field(
        None, min_length=1, max_length=4096, description="argv; wins over the agent's command"
    )
    cwd: OsPath | None = None
    env: dict[EnvKey, OsString] = Field(default_factory=dict, max_length=1024)
    rows: int = Field(32, ge=2, le=500)
    cols: int = Field(120, ge=10, le=1000)
    hooks: bool = Field(True, description="add the agent's reporting hooks (Claude Code: --settings)")
    name: Utf8Text | None = Field(None, max_length=80)
    host: Utf8Text | None = Field(None, max_length=40, description="pane host (`pty` unless another is configured)")
    node: Utf8Text | None = Field(
        None, max_length=40, description="cluster: the node to start it on (default: this one)"
    )

    @model_validator(mode="after")
    def _agent_or_command(self) -> NewSession:
        if self.kind == "acp" and self.host not in (None, "acp"):
            raise ValueError("an ACP session runs on the acp host; leave host out")
        if not self.agent and not self.command:
            raise ValueError("give an agent, a command, or both")
        return self


class SendBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: Utf8Text = Field(max_length=100_000)
    enter: bool = Field(True, description="press Enter after the text")


class AnswerBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    option: Annotated[int, Field(ge=1, le=99)] | Annotated[Utf8Text, Field(min_length=1, max_length=200)] | None = (
        Field(None, description="a prompt's option number; for an ACP session also the permission's optionId")
    )
    request: Utf8Text | None = Field(
        None,
        max_length=64,
        description="ACP: the permission request this answer is for (409 if it is no longer pending)",
    )
    keys: Utf8Text | None = Field(None, min_length=1, max_length=1000)
    confirm: bool = Field(False, description="must be true: the user confirmed this answer")

    @model_validator(mode="after")
    def _one_of(self) -> AnswerBody:
        if (self.option is None) == (self.keys is None):
            raise ValueError("give exactly one of option or keys")
        if not self.confirm:
            raise ValueError("confirm must be true: answers are only sent once the user confirmed them")
        return self


class ResizeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rows: int = Field(ge=2, le=500)
    cols: int = Field(ge=10, le=1000)
