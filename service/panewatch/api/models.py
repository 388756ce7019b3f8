"""Request bodies, validated before any route runs (a bad one is a 422 with the field).

Text fields use ``validation``'s types: what the OS or a UTF-8 answer cannot carry (NUL, lone
surrogates, '=' in an environment name) is refused here, before any session exists."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..access.users import NAME_PATTERN
from ..access.validation import AgentName, EnvKey, OsPath, OsString, Utf8Text
from ..engine import HostKind
from ..states import SessionKind


class NewWorktree(BaseModel):
    """``worktree`` of a new session: the agent starts in a git worktree added for it."""

    model_config = ConfigDict(extra="forbid")
    repo: OsPath = Field(description="a folder of the git repository")
    branch: OsString = Field(
        min_length=1,
        max_length=200,
        description="the worktree's branch: created from `base`, or checked out if it exists",
    )
    base: OsString | None = Field(
        None, min_length=1, max_length=200, description="what a new branch starts from (default: the repository's HEAD)"
    )


class NewSession(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: SessionKind = Field(
        SessionKind.terminal,
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
    worktree: NewWorktree | None = Field(None, description="start the agent in a new git worktree (not with cwd)")
    env: dict[EnvKey, OsString] = Field(default_factory=dict, max_length=1024)
    rows: int = Field(32, ge=2, le=500)
    cols: int = Field(120, ge=10, le=1000)
    hooks: bool = Field(True, description="add the agent's reporting hooks (Claude Code: --settings)")
    name: Utf8Text | None = Field(None, max_length=80)
    host: HostKind | None = Field(None, description="pane host (`pty` unless another is configured)")
    node: Utf8Text | None = Field(
        None, max_length=40, description="cluster: the node to start it on (default: this one)"
    )
    users: list[Annotated[str, Field(pattern=NAME_PATTERN)]] | None = Field(
        None, max_length=100, description="restrict it to these users (and its creator's; owners see all)"
    )

    @field_validator("host", mode="before")
    @classmethod
    def _known_host(cls, value: Any) -> Any:
        if value is not None and value not in tuple(HostKind):
            shown = str(value)[:40]
            raise ValueError(f"unknown host {shown!r} (known: {', '.join(HostKind)})")
        return value

    @model_validator(mode="after")
    def _agent_or_command(self) -> NewSession:
        if self.kind == SessionKind.acp and self.host not in (None, HostKind.acp):
            raise ValueError("an ACP session runs on the acp host; leave host out")
        if not self.agent and not self.command:
            raise ValueError("give an agent, a command, or both")
        if self.worktree is not None and self.cwd:
            raise ValueError("give cwd or worktree, not both: a worktree session starts in its worktree")
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
    prompt_id: Utf8Text | None = Field(
        None,
        max_length=64,
        description="the prompt this answer is for (the screen's `prompt.id`, a notification's prompt id): "
        "409 'this prompt is gone' unless that same prompt is on the pane right before writing",
    )
    confirm: bool = Field(False, description="must be true: the user confirmed this answer")

    @model_validator(mode="after")
    def _one_of(self) -> AnswerBody:
        if (self.option is None) == (self.keys is None):
            raise ValueError("give exactly one of option or keys")
        if not self.confirm:
            raise ValueError("confirm must be true: answers are only sent once the user confirmed them")
        return self


class RenameBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: Utf8Text = Field(min_length=1, max_length=80)


class ResizeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rows: int = Field(ge=2, le=500)
    cols: int = Field(ge=10, le=1000)
