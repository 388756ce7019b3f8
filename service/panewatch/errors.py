"""One family of domain errors: what the engine refuses, and why, independent of HTTP.

The API maps each class to a status once (``api/errors.py``); tools catch them by class.
"""

from __future__ import annotations

from .states import Decision


class PanewatchError(Exception):
    """Base of every error the engine raises on purpose."""

    #: HTTP status the API answers with (kept here so the mapping cannot miss a class).
    status = 400


class InvalidRequest(PanewatchError, ValueError):
    """A request the engine cannot honour as given (unknown agent, no command, bad size...)."""

    status = 422


class UnknownSession(PanewatchError, LookupError):
    """No session with this id (never created, or deleted)."""

    status = 404


class Conflict(PanewatchError):
    """The pane's state forbids this write right now (``send`` to a blocked pane...);
    ``decision`` is the state that was read just before refusing."""

    status = 409

    def __init__(self, message: str, decision: Decision) -> None:
        super().__init__(message)
        self.decision = decision


class PromptGone(Conflict):
    """An answer named a prompt (its prompt id) that is no longer the one on the pane: answered
    already, withdrawn, or replaced by a newer prompt. Nothing was written."""

    def __init__(self, decision: Decision) -> None:
        super().__init__(
            "this prompt is gone: the pane shows another prompt now, or none; read it again before answering",
            decision,
        )


class NotReadingInput(Conflict):
    """The agent is not reading its input (or is gone): the bytes were not queued."""

    def __init__(self, detail: str, decision: Decision) -> None:
        super().__init__(f"the agent is not reading its input ({detail})", decision)


class StartupRefused(Exception):
    """The server cannot start as configured (the cluster refused it, nats-py is missing...): one
    line to print before anything listens. Not a domain error: no request ever sees it."""


class Unavailable(PanewatchError):
    """The engine is not running (starting up or shutting down)."""

    status = 503
