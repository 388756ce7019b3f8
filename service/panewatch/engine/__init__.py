"""The engine: every session of one server behind one async, typed contract (``EngineAPI``).

The API, the cluster, the lab and the benchmark use what this package exports and nothing
else of it: the local ``Engine``, the contract, its read models and inputs, the typed events,
and ``watch_terminal`` (another node's pane as a read-only terminal channel). The modules
whose names start with ``_`` are its private parts.
"""

from ..hosts.base import HostKind
from ..states import SessionKind
from ..worktrees import Changes, FileChange, WorktreeInfo, WorktreeSpec
from ._facade import Engine
from ._options import EngineOptions
from ._repaint import watch_terminal
from .contract import EngineAPI, NodeEngine, ReportDesk, TerminalChannel
from .events import Event, EventStream
from .models import (
    Actor,
    ActorKind,
    AgentList,
    AnswerResult,
    Cancelled,
    ConversationView,
    Deletion,
    EngineStats,
    Explanation,
    Prompt,
    ScreenFrame,
    ScreenView,
    Sent,
    SessionInfo,
    SessionSpec,
)

__all__ = [
    "Actor",
    "ActorKind",
    "AgentList",
    "AnswerResult",
    "Cancelled",
    "Changes",
    "ConversationView",
    "Deletion",
    "Engine",
    "EngineAPI",
    "EngineOptions",
    "EngineStats",
    "Event",
    "EventStream",
    "Explanation",
    "FileChange",
    "HostKind",
    "NodeEngine",
    "Prompt",
    "ReportDesk",
    "ScreenFrame",
    "ScreenView",
    "Sent",
    "SessionInfo",
    "SessionKind",
    "SessionSpec",
    "TerminalChannel",
    "WorktreeInfo",
    "WorktreeSpec",
    "watch_terminal",
]
