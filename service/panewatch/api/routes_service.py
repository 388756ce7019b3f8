"""Health, metrics, the dashboard page and its static files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response

from .. import __version__, metrics
from ..auth import COOKIE, token_matches
from ..engine import Engine
from .deps import engine_of, gate_of, require_token, settings_of

router = APIRouter()


def web_dir() -> Path:
    """``web/`` shipped in the wheel, or the repository's."""
    here = Path(__file__).resolve().parent.parent
    packaged = here / "web"
    return packaged if packaged.is_dir() else here.parent.parent / "web"


@router.get("/healthz", tags=["service"])
async def healthz(engine: Annotated[Engine, Depends(engine_of)]) -> dict[str, Any]:
    return {"ok": True, "version": __version__, "sessions": len(engine)}


@router.get(
    "/metrics", tags=["service"], response_class=Response, responses={200: {"content": {metrics.CONTENT_TYPE: {}}}}
)
async def metrics_text(request: Request, engine: Annotated[Engine, Depends(engine_of)]) -> Response:
    """Prometheus text format; needs the token unless ``metrics_public`` is set."""
    if not settings_of(request).metrics_public:
        require_token(request)
    return Response(metrics.exposition(engine.stats(), __version__), media_type=metrics.CONTENT_TYPE)


@router.get("/", include_in_schema=False)
async def index(request: Request, token_q: Annotated[str | None, Query(alias="token")] = None) -> Response:
    settings, gate = settings_of(request), gate_of(request)
    if token_q is not None:
        if not token_matches(token_q, settings.token or ""):
            return HTMLResponse(
                "<h1>Wrong token</h1><p>Open the login URL that <code>panewatch serve</code> printed.</p>",
                status_code=403,
            )
        response = RedirectResponse("/", status_code=303)
        # a login id, not the token: it expires and POST /logout revokes it
        response.set_cookie(
            COOKIE,
            gate.logins.issue(),
            httponly=True,
            samesite="strict",
            max_age=int(settings.login_ttl_s),
            secure=(settings.public_url or "").startswith("https:"),
        )
        return response
    why = gate.check(request)
    if why == "missing":
        return HTMLResponse(
            "<h1>Log in</h1><p>Open the login URL that <code>panewatch serve</code> "
            "printed (it ends in <code>?token=…</code>).</p>",
            status_code=401,
        )
    if why == "wrong":
        denied = HTMLResponse("<h1>Wrong token or expired login</h1>", status_code=403)
        denied.delete_cookie(COOKIE)
        return denied
    return FileResponse(web_dir() / "index.html", headers={"Cache-Control": "no-store"})


@router.post("/logout", tags=["service"])
async def logout(request: Request) -> Response:
    """Revoke this browser's login (its cookie stops working at once, here and anywhere it leaked)."""
    revoked = gate_of(request).logins.revoke(request.cookies.get(COOKIE))
    response = JSONResponse({"logged_out": revoked})
    response.delete_cookie(COOKIE)
    return response


@router.get("/static/{path:path}", include_in_schema=False)
async def static(path: str) -> Response:
    root = web_dir().resolve()
    target = (root / path).resolve()
    if root not in target.parents or not target.is_file():
        raise HTTPException(404, "no such file")
    return FileResponse(target, headers={"Cache-Control": "no-cache"})
