"""Agents and sessions: create, list, read, resize, delete, and the guarded writes."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException
from fastapi.responses import Response, StreamingResponse

from .. import transcript as transcripts
from ..engine import Engine, SessionSpec
from ..errors import InvalidRequest
from .deps import engine_of, require_token, settle
from .models import AnswerBody, NewSession, ResizeBody, SendBody

router = APIRouter(dependencies=[Depends(require_token)])
E = Annotated[Engine, Depends(engine_of)]


@router.get("/api/agents", tags=["agents"])
async def agents(engine: E) -> dict[str, Any]:
    return engine.agents()


@router.post("/api/sessions", status_code=201, tags=["sessions"])
async def create_session(body: NewSession, engine: E) -> dict[str, Any]:
    spec = SessionSpec(
        agent=body.agent,
        command=body.command,
        cwd=body.cwd,
        env=body.env,
        rows=body.rows,
        cols=body.cols,
        hooks=body.hooks,
        name=body.name,
        host="acp" if body.kind == "acp" else body.host,
    )
    if not body.node:
        return await settle(engine.create(spec))
    if getattr(engine, "node", None) is None:  # only the cluster façade knows other nodes
        raise InvalidRequest(f"unknown node {body.node!r}: this server is not in a cluster (--cluster-url)")
    return await settle(engine.create(spec, node=body.node))  # type: ignore[call-arg]


@router.get("/api/sessions", tags=["sessions"])
async def list_sessions(engine: E) -> dict[str, Any]:
    return {"sessions": engine.list()}


@router.get("/api/sessions/{sid}", tags=["sessions"])
async def get_session(sid: str, engine: E) -> dict[str, Any]:
    return await settle(engine.get(sid))


@router.post(
    "/api/sessions/{sid}/resume",
    tags=["sessions"],
    responses={
        409: {
            "description": "the session is not lost, or its agent cannot resume (no resume "
            "command in its manifest, no conversation id reported)"
        }
    },
)
async def resume_session(sid: str, engine: E) -> dict[str, Any]:
    """A lost session's agent, started again on its own conversation in the same folder."""
    return await engine.resume(sid)


@router.delete("/api/sessions/{sid}", tags=["sessions"])
async def delete_session(sid: str, engine: E) -> dict[str, Any]:
    return await engine.delete(sid)


@router.get("/api/sessions/{sid}/screen", tags=["screens"])
async def get_screen(sid: str, engine: E) -> dict[str, Any]:
    return await settle(engine.screen(sid))


@router.get("/api/sessions/{sid}/explain", tags=["screens"])
async def explain(sid: str, engine: E) -> dict[str, Any]:
    return await settle(engine.explain(sid))


@router.post(
    "/api/sessions/{sid}/send",
    tags=["writes"],
    responses={
        409: {"description": "the pane is blocked now (answer it instead), or the agent is not reading its input"}
    },
)
async def send(sid: str, body: SendBody, engine: E) -> dict[str, Any]:
    decision = await engine.send(sid, body.text, enter=body.enter)
    return {"sent": True, "state_before": decision.state}


@router.post(
    "/api/sessions/{sid}/answer", tags=["writes"], responses={409: {"description": "the pane is not blocked now"}}
)
async def answer(sid: str, body: AnswerBody, engine: E) -> dict[str, Any]:
    result = await engine.answer(sid, option=body.option, keys=body.keys, request=body.request)
    return {"took": result.took, "state": result.state, "rule": result.rule, "waited_s": result.waited}


@router.post("/api/sessions/{sid}/resize", tags=["sessions"])
async def resize(sid: str, body: ResizeBody, engine: E) -> dict[str, Any]:
    return await settle(engine.resize(sid, body.rows, body.cols))


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
    return StreamingResponse(
        transcripts.file_chunks(path, size),
        media_type=transcripts.MEDIA_TYPE,
        headers={"Content-Length": str(size), "Content-Disposition": f'attachment; filename="{sid}.cast"'},
    )
