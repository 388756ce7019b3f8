"""The engine's read models and inputs: what ``EngineAPI`` takes and gives, typed.

Each model is exactly the JSON the HTTP and WebSocket API has always sent (the routes declare
them as response models, so ``/openapi.json`` documents every body); a key that is only there
sometimes (``resume`` on a lost session, ``node`` in a cluster, ``styles`` when asked for) is
left out when it is None rather than sent as null. Frozen: a read model is a fact at one moment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..hosts.base import HostKind
from ..states import Decision, RequestSource, SessionKind, Source, State
from ..worktrees import WorktreeInfo, WorktreeSpec

__all__ = [
    "Actor",
    "ActorKind",
    "AgentList",
    "AgentSummary",
    "AnswerResult",
    "Cancelled",
    "ConversationView",
    "Cursor",
    "DecisionView",
    "Deletion",
    "EngineStats",
    "Explanation",
    "ManifestRefusal",
    "Prompt",
    "PromptOption",
    "RequestView",
    "ResumeOffer",
    "RuleTraceView",
    "ScreenFrame",
    "ScreenView",
    "Sent",
    "SessionInfo",
    "SessionSpec",
    "Size",
    "TranscriptInfo",
]


#: A field that is left out of the JSON when it is None (a key that is only there sometimes).
Sometimes = Field(None, exclude_if=lambda value: value is None)


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


# --- who acts ---------------------------------------------------------------------------------


class ActorKind(StrEnum):
    """Who may act on a session: the API token (scripts, the CLI), a person logged into the
    dashboard, a registered device, an automatic policy, or a node (another node forwarding a
    user's act, or this one restoring its sessions)."""

    token = "token"
    user = "user"
    device = "device"
    policy = "policy"
    node = "node"


class Actor(_Model):
    """Who does a write: every create, send, answer, keys, resize, resume, delete and cancel
    names one, and the events of writes carry it (the approval ledger will read them)."""

    kind: ActorKind
    id: str = Field(max_length=200)
    name: str = Field(max_length=200)
    user: str | None = Field(None, max_length=200, description="a device's user", exclude_if=lambda u: u is None)

    def __str__(self) -> str:
        return f"{self.kind} {self.name}" + (f" of {self.user}" if self.user else "")


# --- what to launch ----------------------------------------------------------------------------


@dataclass
class SessionSpec:
    """What to launch: an agent's manifest and/or an explicit command."""

    agent: str | None = None
    command: list[str] | None = None
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    rows: int = 32
    cols: int = 120
    hooks: bool = True
    name: str | None = None
    host: HostKind | None = None  # the pane host's kind (None: the engine's default)
    worktree: WorktreeSpec | None = None  # start in a new git worktree (then ``cwd`` is left out)


# --- sessions ----------------------------------------------------------------------------------


class TranscriptInfo(_Model):
    path: str
    bytes: int
    truncated: bool
    error: str | None
    elapsed: float


class ResumeOffer(_Model):
    """What a lost session's card offers: whether Resume can bring it back, and why not."""

    possible: bool
    why: str | None


class RequestView(_Model):
    """What a blocked session asks (``asks.Request``): the question, the tool, what it acts on."""

    question: str
    tool: str | None
    subject: str | None
    subject_kind: str | None  # "command" | "path" | "url"
    detail: str | None
    source: RequestSource
    disagrees: str | None  # the screen reads another subject than the agent's own request


class SessionInfo(_Model):
    """One session: ``GET /api/sessions/{id}``, the events, the dashboard's cards."""

    id: str
    kind: SessionKind = Field(description="how its state is read: from the screen, or through the protocol")
    name: str
    agent: str | None
    launched_agent: str | None
    command: list[str]
    cwd: str
    state: State
    source: Source
    rule: str | None = Field(description="what decided the state: a rule, an event, a program or an exit code")
    why: str
    since: float
    request: RequestView | None  # while blocked: what it asks
    pid: int | None
    host: HostKind
    ref: str | None
    foreground: str | None
    foreground_pid: int | None
    exit_code: int | None
    error: str | None
    rows: int
    cols: int
    title: str
    created: float
    bytes_read: int
    transcript: TranscriptInfo | None
    resume: ResumeOffer | None = Sometimes  # a lost session only
    node: str | None = Sometimes  # in a cluster: the node that runs it
    worktree: WorktreeInfo | None = Sometimes  # a session started in its own git worktree


class Deletion(_Model):
    deleted: str
    exit_code: int | None
    discarded: list[str] | None = Sometimes  # a worktree session: the uncommitted files its removal lost


# --- screens -----------------------------------------------------------------------------------

#: One run of a row's styles: characters, foreground, background (a name, hex or ""), flags
#: (1 bold, 2 italic, 4 underline, 8 reverse, 16 strikethrough).
StyleRun = tuple[int, str, str, int]


class Cursor(_Model):
    row: int
    col: int
    hidden: bool


class Size(_Model):
    rows: int
    cols: int


class PromptOption(_Model):
    """One answer a prompt offers: a number to type, keys that pick it, or an ACP option id."""

    label: str
    option: int | None = Sometimes
    selected: bool | None = Sometimes
    keys: str | None = Sometimes
    option_id: str | None = Sometimes  # ACP: the permission option's id
    kind: str | None = Sometimes  # ACP: allow_once, reject_always...


class Prompt(_Model):
    """What a blocked pane asks, read on the server so every client offers the same answers."""

    kind: Literal["options", "yes_no", "password", "text"]
    options: list[PromptOption]
    #: this prompt instance: an answer naming it lands on it only (409 "this prompt is gone")
    id: str = Field(description="this prompt instance; an answer's prompt_id lands on it only (409 once gone)")
    request: str | None = Sometimes  # ACP: the permission request this prompt is
    title: str | None = Sometimes  # ACP: the tool call's title


class ScreenView(_Model):
    """``GET /api/sessions/{id}/screen``: the visible screen, read fresh, with the state."""

    rows: list[str]
    cursor: Cursor
    size: Size
    state: State
    rule: str | None
    source: Source
    title: str
    prompt: Prompt | None
    request: RequestView | None
    styles: list[list[StyleRun]] | None = Sometimes  # when asked for (``styles=True``)


class ScreenFrame(_Model):
    """A screen WebSocket's frame: the whole view (``full``), or the rows and styles that
    changed since the last frame with the rest of the view."""

    type: Literal["screen"] = "screen"
    full: bool
    rows: list[str] | None = Sometimes
    styles: list[list[StyleRun]] | None = Sometimes
    changed: dict[str, str] | None = Sometimes
    changed_styles: dict[str, list[StyleRun]] | None = Sometimes
    cursor: Cursor
    size: Size
    state: State
    rule: str | None
    source: Source
    title: str
    prompt: Prompt | None
    request: RequestView | None


# --- explanation -------------------------------------------------------------------------------


class DecisionView(_Model):
    state: State
    source: Source
    rule: str | None
    why: str
    event: str | None
    program: str | None
    exit_code: int | None
    since: float

    @classmethod
    def of(cls, d: Decision) -> DecisionView:
        return cls(
            state=d.state,
            source=d.source,
            rule=d.decided_by,
            why=d.why,
            event=d.event,
            program=d.program,
            exit_code=d.exit_code,
            since=d.since,
        )


class VerdictView(_Model):
    state: State
    rule: str | None
    why: str
    evidence: str


class RuleTraceView(_Model):
    name: str
    state: State
    region: str
    matched: bool
    evidence: list[str]
    reason: str


class ReportView(_Model):
    state: State
    event: str
    age_s: float
    request: RequestView | None


class StatusView(_Model):
    state: State
    raw: str
    kind: str
    app: str
    age_s: float
    counts: bool = Field(description="whether it still counts (not older than the screen's last change)")


class ProgressView(_Model):
    state: int
    value: int


class DesktopNote(_Model):
    protocol: str
    title: str
    body: str


class OutOfBand(_Model):
    title: str
    status: StatusView | None
    progress: ProgressView | None
    notifications: list[DesktopNote]


class ScreenSignals(_Model):
    report: ReportView | None
    foreground: str | None
    shell_back: str | None
    out_of_band: OutOfBand


class ProtocolSignals(_Model):
    acp: str


class Explanation(_Model):
    """``GET /api/sessions/{id}/explain``: every rule against the screen, and the other signals."""

    agent: str | None
    manifest_version: str | None
    generic: bool = Field(description="no manifest names the program: the generic rules' best guess decided")
    note: str | None  # says so in words when ``generic``
    screen_verdict: VerdictView | None
    decision: DecisionView
    request: RequestView | None
    signals: ScreenSignals | ProtocolSignals
    rules: list[RuleTraceView]
    rows: list[str]


# --- writes ------------------------------------------------------------------------------------


class Sent(_Model):
    sent: bool
    state_before: State


class AnswerResult(_Model):
    """An answer's outcome: whether the prompt went away (``took``), and the state after."""

    took: bool
    state: State
    rule: str | None
    waited_s: float
    keys: str = Field(exclude=True)  # what was typed (or the ACP option id): for logs and the ledger


class Cancelled(_Model):
    cancelled: bool
    state: State
    source: Source
    rule: str | None
    why: str


# --- agents ------------------------------------------------------------------------------------


class AgentSummary(_Model):
    agent: str
    version: str
    description: str
    processes: list[str]
    command: list[str]
    hooks: str | None
    rules: list[str]


class ManifestRefusal(_Model):
    file: str
    line: int | None
    rule: int | None = Field(description="the refused rule's number in its file")
    reason: str


class AgentList(_Model):
    """``GET /api/agents``: each loaded manifest in short, and every refused one with its reason."""

    agents: list[AgentSummary]
    errors: list[ManifestRefusal]


# --- ACP conversations -------------------------------------------------------------------------


class TextEntry(_Model):
    n: int
    kind: Literal["user", "agent", "thought", "note"]
    text: str


class ToolEntry(_Model):
    n: int
    kind: Literal["tool"]
    text: str
    tool_call_id: str | None
    title: str | None
    tool_kind: str | None
    status: str | None


class PlanItem(_Model):
    content: str
    status: str
    priority: str


class PermissionOffer(_Model):
    option_id: str
    name: str
    kind: str


class PermissionView(_Model):
    request: str
    tool_call_id: str
    title: str
    tool_kind: str
    options: list[PermissionOffer]
    detail: str


class AcpAgentInfo(BaseModel):
    """What the agent said it is (``initialize``); agents add fields freely."""

    model_config = ConfigDict(frozen=True, extra="allow")
    name: str = ""
    title: str | None = None
    version: str = ""


class ConversationView(_Model):
    """An ACP session's conversation (messages, tool calls, plan, pending permission) and state."""

    type: Literal["conversation"] = "conversation"
    session: str
    seq: int
    dropped: int
    entries: list[TextEntry | ToolEntry]
    plan: list[PlanItem]
    permission: PermissionView | None
    permissions: list[PermissionView]
    agent: AcpAgentInfo | None
    session_id: str | None
    phase: str
    turns: int
    stop_reason: str | None
    error: str | None
    faults: dict[str, int]
    stdout_noise: list[str]
    stderr_tail: str
    state: State
    source: Source
    rule: str | None
    why: str


# --- figures -----------------------------------------------------------------------------------


class EngineStats(_Model):
    """Every figure ``/metrics`` and the benchmark show; counters include deleted sessions."""

    sessions: int
    sessions_by_state: dict[str, int]
    transitions: dict[str, int]
    sweeps: int
    sweep_seconds: list[float]
    sweep_seconds_sum: float
    bytes_read: int
    bytes_emulated: int
    screen_errors: int
    classifications: int
    notifications: int
    notifications_suppressed: int
    backlog: int = Field(description="the largest backlog (bytes received, not yet emulated) of any pane")
    bytes_read_by_session: dict[str, int]
