"""ACP sessions: agents that speak the Agent Client Protocol over stdio, Panewatch as the client.

The public surface is small: :class:`AcpClient` (one session), its errors, and the
conversation it keeps. The JSON-RPC framing, the process on pipes and the file capability
are private modules behind it. The pane host that plugs this into the engine is
``panewatch.hosts.acp``.
"""

from .client import AcpClient, AcpError, Busy, Gone, Listener, NotOffered, Timeouts, Withdrawn
from .conversation import Conversation, PendingPermission

__all__ = [
    "AcpClient",
    "AcpError",
    "Busy",
    "Conversation",
    "Gone",
    "Listener",
    "NotOffered",
    "PendingPermission",
    "Timeouts",
    "Withdrawn",
]
