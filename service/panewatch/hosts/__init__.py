"""Pane hosts: how a pane's bytes reach the engine and its keys reach the agent.

The engine never touches a PTY, a tmux server or a subprocess pipe itself; it talks to one
:class:`~panewatch.hosts.base.PaneHost` per kind through the protocol in ``base.py``. Each
host passes the same contract tests (``tests/test_host_contract.py``), the in-memory host
included, so a new host is done when it passes them.
"""

from .base import (
    HostError,
    HostKind,
    LaunchRefused,
    LaunchSpec,
    PaneHandle,
    PaneHost,
    PaneSink,
    SpawnError,
    WriteRefused,
)

__all__ = [
    "HostError",
    "HostKind",
    "LaunchRefused",
    "LaunchSpec",
    "PaneHandle",
    "PaneHost",
    "PaneSink",
    "SpawnError",
    "WriteRefused",
]
