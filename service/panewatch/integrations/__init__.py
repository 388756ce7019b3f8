"""Agent integrations: what is specific to one agent CLI beyond its screen rules.

An integration adds what the agent needs at launch (Claude Code: ``--settings``; Codex: ``-c``
overrides; Gemini CLI: an overlay settings folder in its environment; Qwen Code: a system-defaults
file of its own; Cline: an overlay ``CLINE_DIR``;
opencode: a plugin in ``OPENCODE_CONFIG_CONTENT``;
Copilot CLI: a ``--plugin-dir`` plugin; gptme: a plugin on ``PYTHONPATH``) and reads the agent's own
reports (hook payloads) into a :class:`~panewatch.panes.signals.Report`. The manifest's ``hooks`` field
names the integration; a new agent's hooks plug in by adding a module here and a line to
``INTEGRATIONS``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..panes.signals import Report
from .base import Integration, UnknownPayload, is_plain, plain_report
from .claude import ClaudeIntegration
from .cline import ClineIntegration
from .codex import CodexIntegration
from .copilot import CopilotIntegration
from .gemini import GeminiIntegration
from .gptme import GptmeIntegration
from .opencode import OpencodeIntegration
from .qwen import QwenIntegration

INTEGRATIONS: dict[str, Integration] = {
    "claude": ClaudeIntegration(),
    "codex": CodexIntegration(),
    "gemini": GeminiIntegration(),
    "qwen": QwenIntegration(),
    "cline": ClineIntegration(),
    "opencode": OpencodeIntegration(),
    "copilot": CopilotIntegration(),
    "gptme": GptmeIntegration(),
}

#: Hook payloads from an agent whose manifest names no integration are read as this one's
#: (the only hook format agents send today; a typed-in ``claude`` in a shell pane sends it).
DEFAULT = INTEGRATIONS["claude"]


def integration(name: str | None) -> Integration | None:
    """The integration a manifest's ``hooks`` field names (None: none)."""
    return INTEGRATIONS.get(name) if name else None


def hooked(
    chosen: Integration, processes: Sequence[str], argv: list[str], env: Mapping[str, str]
) -> tuple[list[str], dict[str, str]]:
    """``argv`` and ``env`` with what ``chosen`` adds at launch so the agent's hooks report."""
    return argv + chosen.launch_args(argv, processes, env), {**env, **chosen.launch_env(argv, processes, env)}


def read_report(
    payload: dict[str, Any], now: float, launched: Integration | None, hooks: str | None, memo: dict[str, Any]
) -> Report | None:
    """A report from ``payload``: a plain ``{"state": ...}``, else a hook payload read by the
    foreground agent's integration (its manifest's ``hooks``), else the launched one's, else
    the default. None: an event that says nothing about the pane's state."""
    if is_plain(payload):
        return plain_report(payload, now)
    chosen = integration(hooks) or launched or DEFAULT
    return chosen.interpret(payload, now, memo)


__all__ = [
    "DEFAULT",
    "INTEGRATIONS",
    "Integration",
    "UnknownPayload",
    "hooked",
    "integration",
    "plain_report",
    "read_report",
]
