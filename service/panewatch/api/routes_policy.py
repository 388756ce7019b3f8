"""The approval policy: what is in force (its rules, screen-only ones marked; a refused file's
error), and the kill switch (``pause`` / ``resume``) the page and ``panewatch policy`` use."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field

from ..errors import Unavailable
from ..policy import PolicyStore
from .deps import actor_of, require_token

router = APIRouter(dependencies=[Depends(require_token)])


class PolicyRuleView(BaseModel):
    """A rule in force, as the file says it, with its id (``rule-N`` when the file gives none)."""

    id: str
    agent: str | None
    tool: str | None
    subject: str | None
    folder: str | None
    action: str
    reason: str
    allow_compound: bool
    screen_only: bool = Field(description="acts on a request read off the screen alone: the page marks it")
    dry_run: bool


class PolicyStatus(BaseModel):
    file: str | None = Field(description="the policy file (None: no policy, every prompt asks a person)")
    paused: bool = Field(description="the kill switch: while on, the policy answers nothing")
    error: dict[str, Any] | None = Field(description="the file's refusal (file, line, reason); the last good one stays")
    generation: int
    rules: list[PolicyRuleView]
    decisions: dict[str, int] = Field(description="decisions since start, by action")


def _store(request: Request) -> PolicyStore:
    store = getattr(request.app.state, "policy", None)
    if not isinstance(store, PolicyStore):
        raise Unavailable("this server has no approval policy")
    return store


@router.get("/api/policy", tags=["policy"])
async def policy_status(request: Request) -> PolicyStatus:
    return PolicyStatus.model_validate(_store(request).status())


def _switch(request: Request, paused: bool) -> PolicyStatus:
    store = _store(request)
    store.set_paused(paused, str(actor_of(request)))
    return PolicyStatus.model_validate(store.status())


@router.post("/api/policy/pause", tags=["policy"])
async def pause(request: Request) -> PolicyStatus:
    """Stop the policy answering (its decisions are still recorded, as ``ask``)."""
    return _switch(request, True)


@router.post("/api/policy/resume", tags=["policy"])
async def resume(request: Request) -> PolicyStatus:
    return _switch(request, False)
