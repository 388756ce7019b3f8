"""A mock of the Anthropic Messages API that the real Claude Code CLI can talk to.

The lab points the CLI's ``ANTHROPIC_BASE_URL`` here so that it draws real screens (prompts,
spinners, dialogs) on cue, without a network or a key. Every request and reply is logged
as a JSON line with monotonic and wall-clock times and the scenario step that answered:
that log is the ground truth later evaluations compare the classifier against.

    python -m panewatch_lab.mock_api --port 8765 --scenario basic --log /tmp/mock.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from panewatch_lab import stream
from panewatch_lab.mock_http import TurnLog, read_json, until_end
from panewatch_lab.scenario import Conversation, Scenario, choose, load_scenario, read_conversation

#: Models ``GET /v1/models`` lists (the CLI's model picker may ask).
MODELS = ["claude-opus-5-5", "claude-sonnet-4-5", "claude-haiku-4-5"]


def _error(status: int, kind: str, message: str) -> JSONResponse:
    return JSONResponse({"type": "error", "error": {"type": kind, "message": message}}, status_code=status)


def _summary(conv: Conversation) -> dict[str, Any]:
    return {
        "kind": conv.kind,
        "task": conv.task[:200],
        "after": conv.after,
        "result": conv.result[:200],
        "error": conv.error,
        "cwd": conv.cwd,
    }


def build_app(
    scenario: Scenario | str | Path | None = None, log_path: str | Path | None = None, log_bodies: bool = False
) -> Starlette:
    """The ASGI app; ``scenario`` is a Scenario, a path or a bundled name (default ``basic``)."""
    scen = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
    log = TurnLog(log_path, bodies=log_bodies)

    def log_request(rid: int, request: Request, body: Any, **extra: Any) -> None:
        fields: dict[str, Any] = {
            "id": rid,
            "method": request.method,
            "path": request.url.path,
            "query": request.url.query,
            "user_agent": request.headers.get("user-agent", ""),
            "beta": request.headers.get("anthropic-beta", ""),
            **extra,
        }
        if log.bodies:
            fields["body"] = body
        log.write("request", **fields)

    async def messages(request: Request) -> Response:
        rid = log.next_id()
        body = await read_json(request)
        if body is None:
            log_request(rid, request, None, bad_json=True)
            return _error(400, "invalid_request_error", "body must be a JSON object")
        conv = read_conversation(body)
        step = choose(scen, conv)
        log_request(
            rid,
            request,
            body,
            model=body.get("model"),
            stream=bool(body.get("stream")),
            tools=len(body.get("tools") or []),
            messages=len(body.get("messages") or []),
            max_tokens=body.get("max_tokens"),
            conversation=_summary(conv),
            step=step.id,
        )
        pacing = scen.pacing_for(step)
        reply = stream.message(step, conv, body)
        if not body.get("stream"):
            await asyncio.sleep(pacing.ttft)
            log.write(
                "reply",
                id=rid,
                step=step.id,
                stream=False,
                status="complete",
                stop_reason=reply["stop_reason"],
                content=reply["content"],
            )
            return JSONResponse(reply)

        async def sse() -> AsyncIterator[bytes]:
            for event in stream.events(reply, pacing):
                if event.delay > 0:
                    await asyncio.sleep(event.delay)
                if event.name == "content_block_start" and event.data["index"] == 0:
                    log.write("first_token", id=rid, step=step.id)
                yield event.encode()

        def ended(status: str) -> None:
            log.write(
                "reply",
                id=rid,
                step=step.id,
                stream=True,
                status=status,
                stop_reason=reply["stop_reason"],
                content=reply["content"],
            )

        return StreamingResponse(
            until_end(sse(), ended),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache", "request-id": f"req_mock_{rid}"},
        )

    async def count_tokens(request: Request) -> Response:
        rid = log.next_id()
        body = await read_json(request) or {}
        tokens = max(1, len(json.dumps(body)) // 4)
        log_request(rid, request, body, model=body.get("model"), input_tokens=tokens)
        return JSONResponse({"input_tokens": tokens})

    async def models(request: Request) -> Response:
        rid = log.next_id()
        log_request(rid, request, None)
        data = [{"type": "model", "id": m, "display_name": m, "created_at": "2026-01-01T00:00:00Z"} for m in MODELS]
        return JSONResponse({"data": data, "has_more": False, "first_id": MODELS[0], "last_id": MODELS[-1]})

    async def unknown(request: Request) -> Response:
        """Anything else is logged (to learn what the CLI calls) and answered 404, which it tolerates."""
        rid = log.next_id()
        raw = await request.body()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw[:2000].decode(errors="replace")
        log_request(rid, request, body, unknown=True)
        return _error(404, "not_found_error", f"mock: no route for {request.method} {request.url.path}")

    routes = [
        Route("/v1/messages", messages, methods=["POST"]),
        Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/{path:path}", unknown, methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        yield
        log.close()

    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.log = log
    app.state.scenario = scen
    return app


def main(argv: list[str] | None = None, prog: str = "python -m panewatch_lab.mock_api") -> None:
    import uvicorn

    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--scenario", default=None, help="TOML file, or a name in panewatch_lab/scenarios/")
    parser.add_argument("--log", default=None, help="JSON-lines request/reply log (ground truth)")
    parser.add_argument("--log-bodies", action="store_true", help="also log full request bodies (large)")
    args = parser.parse_args(argv)
    app = build_app(args.scenario, args.log, log_bodies=args.log_bodies)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
