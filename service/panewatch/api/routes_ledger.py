"""The ledger of decisions: ``GET /api/ledger`` (paged, filtered) and its JSON-lines export.

Every read is bounded (a page, or the export read page by page with the loop let go between
them), so a long ledger never holds the event loop."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import StreamingResponse

from ..sinks.ledger import PAGE_MAX, Ledger, LedgerPage, LedgerQuery
from .deps import require_token, visible

router = APIRouter(tags=["ledger"], dependencies=[Depends(require_token)])
#: The export's media type: JSON lines.
EXPORT_TYPE = "application/x-ndjson"


def ledger_of(request: Request) -> Ledger:
    ledger: Ledger | None = getattr(request.app.state, "ledger", None)
    if ledger is None:
        raise HTTPException(503, "the ledger is not available on this server (no session registry)")
    return ledger


L = Annotated[Ledger, Depends(ledger_of)]
SessionQ = Annotated[str | None, Query(min_length=1, max_length=200, description="only this session's rows")]
ActorQ = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=200,
        description="only this actor's rows: a user's name (every device of that person) or an actor's id "
        "(one device, the API token, a policy rule, a node); either matches",
    ),
]
UserQ = Annotated[
    str | None, Query(min_length=1, max_length=200, description="only rows by this user's devices (its name)")
]
SinceQ = Annotated[datetime | None, Query(description="only rows from then on: ISO 8601, or seconds since the epoch")]


@router.get("/api/ledger", response_model=LedgerPage)
async def ledger_page(
    ledger: L,
    request: Request,
    session: SessionQ = None,
    actor: ActorQ = None,
    user: UserQ = None,
    since: SinceQ = None,
    limit: Annotated[int, Query(ge=1, le=PAGE_MAX, description="rows per page")] = 100,
    before: Annotated[int | None, Query(ge=1, description="rows before this seq (a page's next)")] = None,
) -> LedgerPage:
    """The newest matching decisions, oldest first; ``next`` reads the page before (rows of a
    session restricted to other users are left out)."""
    query = LedgerQuery(session, actor, None if since is None else since.timestamp(), before, limit, user)
    page = ledger.page(query)
    return page.model_copy(update={"entries": [e for e in page.entries if visible(request, e.session)]})


@router.get(
    "/api/ledger.jsonl",
    response_class=StreamingResponse,
    responses={200: {"content": {EXPORT_TYPE: {}}, "description": "one JSON object a line, oldest first"}},
)
async def ledger_export(
    ledger: L, request: Request, session: SessionQ = None, actor: ActorQ = None, user: UserQ = None
) -> StreamingResponse:
    """Every matching row as one JSON line, oldest first: the canonical text each is hashed as
    (rows of a session restricted to other users are left out)."""
    query = LedgerQuery(session, actor, user=user)

    def shown(body: str) -> bool:
        sid = json.loads(body).get("session")
        return not isinstance(sid, str) or visible(request, sid)

    async def lines() -> AsyncIterator[bytes]:
        seq = 0
        while rows := ledger.bodies_after(seq, query):
            yield "".join(body + "\n" for _, body in rows if shown(body)).encode()
            seq = rows[-1][0]
            await asyncio.sleep(0)  # one page per loop turn

    return StreamingResponse(lines(), media_type=EXPORT_TYPE)
