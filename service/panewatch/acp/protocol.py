"""The few ACP messages Panewatch reads, as pydantic models (schema v1, protocol version 1).

Only what the client acts on is typed; everything else an agent sends is allowed through
(``extra="allow"``), because agents add ``_meta`` and newer fields freely and a client that
rejected them would break on every adapter release. A message that lacks what we *act on*
(a permission request without ``toolCall``) fails validation and is answered as invalid.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

PROTOCOL_VERSION = 1

#: Why a prompt turn ended (``session/prompt`` response). Unknown values are kept as given.
STOP_REASONS = ("end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled")
OPTION_KINDS = ("allow_once", "allow_always", "reject_once", "reject_always")


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class AgentInfo(_Lenient):
    name: str = ""
    title: str | None = None
    version: str = ""


class InitializeResponse(_Lenient):
    protocol_version: int = Field(alias="protocolVersion")
    agent_capabilities: dict[str, Any] = Field(default_factory=dict, alias="agentCapabilities")
    agent_info: AgentInfo | None = Field(None, alias="agentInfo")
    auth_methods: list[dict[str, Any]] = Field(default_factory=list, alias="authMethods")


class NewSessionResponse(_Lenient):
    session_id: str = Field(alias="sessionId", min_length=1)


class PromptResponse(_Lenient):
    stop_reason: str = Field(alias="stopReason", min_length=1, max_length=64)


class PermissionOption(_Lenient):
    option_id: str = Field(alias="optionId", min_length=1, max_length=200)
    name: str = Field(max_length=500)
    kind: str = Field(max_length=64)


class ToolCallRef(_Lenient):
    """A ``ToolCallUpdate``: the id is required, the rest may come later."""

    tool_call_id: str = Field(alias="toolCallId", min_length=1)
    title: str | None = None
    kind: str | None = None
    status: str | None = None
    content: list[Any] | None = None
    locations: list[Any] | None = None
    raw_input: Any = Field(None, alias="rawInput")


class RequestPermission(_Lenient):
    session_id: str = Field(alias="sessionId")
    tool_call: ToolCallRef = Field(alias="toolCall")
    options: list[PermissionOption]


class SessionNotification(_Lenient):
    session_id: str = Field(alias="sessionId")
    update: dict[str, Any]


class ReadTextFile(_Lenient):
    session_id: str = Field(alias="sessionId")
    path: str = Field(min_length=1, max_length=4096)
    line: int | None = Field(None, ge=1)
    limit: int | None = Field(None, ge=0)


class WriteTextFile(_Lenient):
    session_id: str = Field(alias="sessionId")
    path: str = Field(min_length=1, max_length=4096)
    content: str


def selected(option_id: str) -> dict[str, Any]:
    """A ``RequestPermissionResponse`` picking one option."""
    return {"outcome": {"outcome": "selected", "optionId": option_id}}


CANCELLED: dict[str, Any] = {"outcome": {"outcome": "cancelled"}}

ClientMethod = Literal["session/request_permission", "fs/read_text_file", "fs/write_text_file"]


def client_capabilities() -> dict[str, Any]:
    """What this client offers: text files inside the session's folder; no terminals (an agent
    that gets none runs its commands itself, where they show as tool calls)."""
    return {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": False}


def text_of(content: Any) -> str:
    """The text of a ``ContentBlock`` (or of a tool call's ``content`` item), '' when none."""
    if not isinstance(content, dict):
        return ""
    kind = content.get("type")
    if kind == "text":
        text = content.get("text")
        return text if isinstance(text, str) else ""
    if kind == "content":  # a tool call's content wraps a ContentBlock
        return text_of(content.get("content"))
    if kind == "diff":
        return f"diff {content.get('path', '')}"
    if kind == "terminal":
        return f"terminal {content.get('terminalId', '')}"
    if kind == "resource_link":
        return str(content.get("uri", ""))
    if kind == "resource":
        res = content.get("resource")
        return str(res.get("uri", "")) if isinstance(res, dict) else ""
    if kind == "image":
        return "[image]"
    return ""
