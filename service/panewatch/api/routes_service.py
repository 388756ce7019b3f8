"""Health, metrics, the dashboard page and its static files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from pydantic import BaseModel, Field

from .. import __version__
from ..access.auth import COOKIE, DEVICE_COOKIE, token_matches
from ..engine import EngineAPI
from ..sinks import metrics
from .deps import engine_of, gate_of, require_token, secure_cookies, settings_of

router = APIRouter()
E = Annotated[EngineAPI, Depends(engine_of)]


class Health(BaseModel):
    ok: bool
    version: str
    sessions: int


class LoggedOut(BaseModel):
    logged_out: bool = Field(description="whether this browser had a login to revoke")


def web_dir() -> Path:
    """``web/`` shipped in the wheel, or the repository's."""
    here = Path(__file__).resolve().parent.parent
    packaged = here / "web"
    return packaged if packaged.is_dir() else here.parent.parent / "web"


@router.get("/healthz", tags=["service"])
async def healthz(engine: E) -> Health:
    return Health(ok=True, version=__version__, sessions=await engine.count())


@router.get(
    "/metrics", tags=["service"], response_class=Response, responses={200: {"content": {metrics.CONTENT_TYPE: {}}}}
)
async def metrics_text(request: Request, engine: E) -> Response:
    """Prometheus text format; needs the token unless ``metrics_public`` is set."""
    if not settings_of(request).metrics_public:
        require_token(request)
    text = metrics.exposition(await engine.stats(), __version__)
    pusher = getattr(request.app.state, "push", None)
    if pusher is not None:
        text += metrics.push_exposition(pusher.counts, pusher.by_device())
    policy = getattr(request.app.state, "policy", None)
    if policy is not None:
        text += metrics.policy_exposition(policy.counts)
    answers = getattr(request.app.state, "answers", None)
    if answers is not None:
        text += answers.exposition()
    return Response(text, media_type=metrics.CONTENT_TYPE)


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
            secure=secure_cookies(request),
        )
        return response
    why = gate.check(request)
    if why == "revoked":
        revoked = HTMLResponse(
            "<h1>This device was revoked</h1><p>Pair it again: <code>panewatch pair</code>.</p>", status_code=401
        )
        revoked.delete_cookie(DEVICE_COOKIE)
        return revoked
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


@router.post("/logout", tags=["service"], response_model=LoggedOut)
async def logout(request: Request) -> Response:
    """Revoke this browser's login (its cookie stops working at once, here and anywhere it leaked)."""
    login = request.cookies.get(COOKIE)
    response = JSONResponse({"logged_out": gate_of(request).logins.revoke(login)})
    if login is not None:  # only then: a page of another site posts here without it, and a
        response.delete_cookie(COOKIE)  # Set-Cookie in its answer would still log the browser out
    return response


@router.get("/sw.js", include_in_schema=False)
async def service_worker() -> Response:
    """The service worker, at the root so that its scope is the whole app (``/``)."""
    return FileResponse(
        web_dir() / "sw.js",
        media_type="text/javascript",
        headers={"Cache-Control": "no-cache", "Service-Worker-Allowed": "/"},
    )


@router.get("/manifest.webmanifest", include_in_schema=False)
async def web_manifest() -> Response:
    return FileResponse(
        web_dir() / "manifest.webmanifest",
        media_type="application/manifest+json",
        headers={"Cache-Control": "no-cache"},
    )


@router.get("/static/{path:path}", include_in_schema=False)
async def static(path: str) -> Response:
    root = web_dir().resolve()
    target = (root / path).resolve()
    if root not in target.parents or not target.is_file():
        raise HTTPException(404, "no such file")
    return FileResponse(target, headers={"Cache-Control": "no-cache"})
