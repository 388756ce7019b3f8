"""Health, metrics, the dashboard page and its static files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response

from .. import __version__, metrics
from ..auth import COOKIE, presented_token, token_matches
from ..engine import Engine
from .deps import engine_of, require_token, settings_of

router = APIRouter()


def web_dir() -> Path:
    """``web/`` shipped in the wheel, or the repository's."""
    here = Path(__file__).resolve().parent.parent
    packaged = here / "web"
    return packaged if packaged.is_dir() else here.parent.parent / "web"


@router.get("/healthz", tags=["service"])
async def healthz(engine: Annotated[Engine, Depends(engine_of)]) -> dict[str, Any]:
    return {"ok": True, "version": __version__, "sessions": len(engine)}


@router.get("/metrics", tags=["service"], response_class=Response,
            responses={200: {"content": {metrics.CONTENT_TYPE: {}}}})
async def metrics_text(request: Request, engine: Annotated[Engine, Depends(engine_of)]) -> Response:
    """Prometheus text format; needs the token unless ``metrics_public`` is set."""
    if not settings_of(request).metrics_public:
        require_token(request)
    return Response(metrics.exposition(engine.stats(), __version__), media_type=metrics.CONTENT_TYPE)


@router.get("/", include_in_schema=False)
async def index(request: Request, token_q: Annotated[str | None, Query(alias="token")] = None) -> Response:
    token = settings_of(request).token or ""
    if token_q is not None:
        if not token_matches(token_q, token):
            return HTMLResponse("<h1>Wrong token</h1><p>Open the login URL that "
                                "<code>panewatch serve</code> printed.</p>", status_code=403)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict", max_age=30 * 86400)
        return response
    presented = presented_token(request)
    if presented is None:
        return HTMLResponse("<h1>Log in</h1><p>Open the login URL that <code>panewatch serve</code> "
                            "printed (it ends in <code>?token=…</code>).</p>", status_code=401)
    if not token_matches(presented, token):
        denied = HTMLResponse("<h1>Wrong token</h1>", status_code=403)
        denied.delete_cookie(COOKIE)
        return denied
    return FileResponse(web_dir() / "index.html", headers={"Cache-Control": "no-store"})


@router.get("/static/{path:path}", include_in_schema=False)
async def static(path: str) -> Response:
    root = web_dir().resolve()
    target = (root / path).resolve()
    if root not in target.parents or not target.is_file():
        raise HTTPException(404, "no such file")
    return FileResponse(target, headers={"Cache-Control": "no-cache"})
