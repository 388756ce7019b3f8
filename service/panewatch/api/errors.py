"""Every exception a request can raise, as an HTTP response, mapped in one place (starlette style).

The engine's domain errors carry their status; validation and HTTP errors are answered with a
short, cleaned detail that never echoes the client's input whole (a 10 MB body came back whole
before, and a lone surrogate in it broke the JSON answer).
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..access.validation import clean_text, short_errors
from ..errors import Conflict, PanewatchError
from ..worktrees import WorktreeDirty

log = logging.getLogger("panewatch.api")


async def domain_error(request: Request, exc: Exception) -> JSONResponse:
    """``{"detail": reason}`` with the error's status; a conflict also says the state it saw."""
    assert isinstance(exc, PanewatchError)
    content: dict[str, object] = {"detail": clean_text(str(exc), 1000)}
    if isinstance(exc, WorktreeDirty):
        content["files"] = exc.files[:1000]
    if isinstance(exc, Conflict):
        content.update(exc.decision.as_dict())
        log.info(
            "%s refused: %s",
            request.url.path.rsplit("/", 1)[-1],
            exc,
            extra={"session": request.path_params.get("sid")},
        )
    return JSONResponse(status_code=exc.status, content=content)


async def validation_error(request: Request, exc: Exception) -> JSONResponse:
    """422 with pydantic's reasons, each input cut and cleaned."""
    assert isinstance(exc, RequestValidationError)
    return JSONResponse(status_code=422, content={"detail": short_errors(exc)})


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's HTTPException answer, with the detail cleaned and cut (it may quote input)."""
    assert isinstance(exc, StarletteHTTPException)
    detail: Any = exc.detail
    if isinstance(detail, str):
        detail = clean_text(detail, 1000)
    headers = getattr(exc, "headers", None)
    if exc.status_code in (204, 304):
        return Response(status_code=exc.status_code, headers=headers)
    return JSONResponse({"detail": detail}, status_code=exc.status_code, headers=headers)


def install(app: FastAPI) -> None:
    app.add_exception_handler(PanewatchError, domain_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
