"""The engine's domain errors as HTTP responses, mapped in one place (starlette style)."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from ..errors import Conflict, PanewatchError

log = logging.getLogger("panewatch.api")


async def domain_error(request: Request, exc: Exception) -> JSONResponse:
    """``{"detail": reason}`` with the error's status; a conflict also says the state it saw."""
    assert isinstance(exc, PanewatchError)
    content: dict[str, object] = {"detail": str(exc)}
    if isinstance(exc, Conflict):
        content.update(exc.decision.as_dict())
        log.info("%s refused: %s", request.url.path.rsplit("/", 1)[-1], exc,
                 extra={"session": request.path_params.get("sid")})
    return JSONResponse(status_code=exc.status, content=content)


def install(app: FastAPI) -> None:
    app.add_exception_handler(PanewatchError, domain_error)
