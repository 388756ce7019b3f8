"""Agents and sessions: create, list, read, resize, delete, and the guarded writes."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel

from ..engine import (
    Actor,
    AgentList,
    AnswerResult,
    Changes,
    Deletion,
    EngineAPI,
    Explanation,
    HostKind,
    ScreenView,
    Sent,
    SessionInfo,
    SessionKind,
    SessionSpec,
    WorktreeSpec,
)
from ..sinks import transcript as transcripts
from .deps import actor_of, engine_of, require_token, users_of, visible, who_of
from .models import AnswerBody, NewSession, RenameBody, ResizeBody, SendBody

router = APIRouter(dependencies=[Depends(require_token)])
E = Annotated[EngineAPI, Depends(engine_of)]
By = Annotated[Actor, Depends(actor_of)]


class SessionList(BaseModel):
    sessions: list[SessionInfo]


@router.get("/api/agents", tags=["agents"])
async def agents(engine: E) -> AgentList:
    return await engine.agents()


@router.post("/api/sessions", status_code=201, tags=["sessions"])
async def create_session(body: NewSession, engine: E, actor: By, request: Request) -> SessionInfo:
    spec = SessionSpec(
        agent=body.agent,
        command=body.command,
        cwd=body.cwd,
        env=body.env,
        rows=body.rows,
        cols=body.cols,
        hooks=body.hooks,
        name=body.name,
        host=HostKind.acp if body.kind == SessionKind.acp else body.host,
        worktree=WorktreeSpec(body.worktree.repo, body.worktree.branch, body.worktree.base) if body.worktree else None,
    )
    users, who = users_of(request), who_of(request)
    if body.users and users is not None:
        for name in body.users:
            users.get(name)  # an unknown user is a 404 before anything starts
    info = await engine.create(spec, actor=actor, node=body.node or None)
    if body.users and users is not None:  # the creator keeps seeing what it started
        users.restrict(info.id, {*body.users, *([who.user] if who.user else [])})
    return info


@router.get("/api/sessions", tags=["sessions"])
async def list_sessions(engine: E, request: Request) -> SessionList:
    """Every session this caller may see (one restricted to other users is left out)."""
    return SessionList(sessions=[s for s in await engine.list() if visible(request, s.id)])


@router.get("/api/sessions/{sid}", tags=["sessions"])
async def get_session(sid: str, engine: E) -> SessionInfo:
    return await engine.get(sid)


@router.post(
    "/api/sessions/{sid}/resume",
    tags=["sessions"],
    responses={
        409: {
            "description": "the session is not lost, or it cannot be resumed as it was launched (no "
            "resume in its manifest, no conversation id reported, a command that is not the agent's "
            "own, an option the manifest cannot read); the detail says which"
        }
    },
)
async def resume_session(sid: str, engine: E, actor: By) -> SessionInfo:
    """A lost session's agent, started again on its own conversation in the same folder, with
    the wrappers, flags and environment it was launched with."""
    return await engine.resume(sid, actor=actor)


@router.delete(
    "/api/sessions/{sid}",
    tags=["sessions"],
    responses={
        409: {"description": "its worktree has uncommitted changes (`files`); ?discard=true confirms losing them"}
    },
)
async def delete_session(sid: str, engine: E, actor: By, discard: bool = False) -> Deletion:
    """End the session; a worktree session's worktree is removed too (its branch is kept)."""
    return await engine.delete(sid, actor=actor, discard=discard)


@router.get("/api/sessions/{sid}/changes", tags=["sessions"])
async def changes(sid: str, engine: E) -> Changes:
    """What a worktree session's branch changed against its base, uncommitted work included."""
    return await engine.changes(sid)


@router.get("/api/sessions/{sid}/screen", tags=["screens"])
async def get_screen(sid: str, engine: E) -> ScreenView:
    return await engine.screen(sid)


@router.get("/api/sessions/{sid}/explain", tags=["screens"])
async def explain(sid: str, engine: E) -> Explanation:
    return await engine.explain(sid)


@router.post(
    "/api/sessions/{sid}/send",
    tags=["writes"],
    responses={
        409: {"description": "the pane is blocked now (answer it instead), or the agent is not reading its input"}
    },
)
async def send(sid: str, body: SendBody, engine: E, actor: By) -> Sent:
    return await engine.send(sid, body.text, actor=actor, enter=body.enter)


@router.post(
    "/api/sessions/{sid}/answer",
    tags=["writes"],
    responses={409: {"description": "the pane is not blocked now, or the prompt named by prompt_id is gone"}},
)
async def answer(sid: str, body: AnswerBody, engine: E, actor: By) -> AnswerResult:
    return await engine.answer(
        sid, actor=actor, option=body.option, keys=body.keys, request=body.request, prompt_id=body.prompt_id
    )


@router.patch("/api/sessions/{sid}", tags=["sessions"])
async def rename(sid: str, body: RenameBody, engine: E, actor: By) -> SessionInfo:
    """A new name for the session; its record (as GET gives it)."""
    return await engine.rename(sid, body.name, actor=actor)


@router.post("/api/sessions/{sid}/resize", tags=["sessions"])
async def resize(sid: str, body: ResizeBody, engine: E, actor: By) -> SessionInfo:
    return await engine.resize(sid, body.rows, body.cols, actor=actor)


@router.get(
    "/api/sessions/{sid}/transcript",
    tags=["sessions"],
    response_class=Response,
    responses={200: {"content": {transcripts.MEDIA_TYPE: {}}}, 404: {"description": "not recorded"}},
)
async def transcript(sid: str, engine: E) -> Response:
    """The session's asciicast v2 recording (also of a deleted session whose file is kept)."""
    found = await engine.transcript(sid)
    if found is None:
        raise HTTPException(404, f"no recording of session {sid!r} (recordings: --transcripts DIR)")
    path, size = found
    try:
        handle, size = await transcripts.open_recording(path, size)
    except OSError as exc:  # removed or replaced since it was found
        raise HTTPException(404, f"the recording of session {sid!r} went away: {exc.strerror}") from None
    return StreamingResponse(
        transcripts.file_chunks(handle, size),
        media_type=transcripts.MEDIA_TYPE,
        headers={"Content-Length": str(size), "Content-Disposition": f'attachment; filename="{sid}.cast"'},
    )
