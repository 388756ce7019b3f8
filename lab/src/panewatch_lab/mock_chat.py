"""A mock of OpenAI chat completions (``POST /v1/chat/completions``, SSE) for Aider.

Aider has no tool calls: a shell step is a fenced ``bash`` block in the reply (Aider then asks
"Run shell command?"), a write step a whole-file edit block for a file not yet in the chat
(Aider asks "Create new file?").
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from panewatch_lab.agent_scenario import AgentScenario, AgentStep, content_texts, load_agent_scenario, typed_text
from panewatch_lab.mock_http import TurnLog, log_unknown, mock_app, read_json, until_end


def read_messages(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            text = typed_text(content_texts(message.get("content")))
            if text:  # Aider appends its edit-format reminder after a blank line
                return text.split("\n\n")[0]
    return ""


def reply_text(step: AgentStep) -> str:
    text = step.text
    if step.shell:
        text += f"\nRun this:\n\n```bash\n{step.shell}\n```\n"
    if step.write:
        text += f"\n{step.write['path']}\n```\n<<<<<<< SEARCH\n=======\n{step.write['content']}>>>>>>> REPLACE\n```\n"
    return text


def _chunk(rid: int, model: str, delta: dict[str, Any], finish: str | None = None) -> bytes:
    data = {
        "id": f"chatcmpl-mock-{rid}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(data).encode() + b"\n\n"


def build_app(
    scenario: AgentScenario | str | Path | None = None, log_path: str | Path | None = None, log_bodies: bool = False
) -> Starlette:
    scen = scenario if isinstance(scenario, AgentScenario) else load_agent_scenario(scenario)
    log = TurnLog(log_path, bodies=log_bodies)

    async def completions(request: Request) -> Response:
        rid = log.next_id()
        body = await read_json(request)
        if body is None:
            log.write("request", id=rid, path=request.url.path, kind="bad")
            return JSONResponse({"error": {"message": "body must be a JSON object"}}, status_code=400)
        model = str(body.get("model") or "mock")
        task = read_messages(body)
        step = scen.choose(task, "user")
        extra = {"body": body} if log.bodies else {}
        log.write(
            "request",
            id=rid,
            path=request.url.path,
            kind="main",
            model=model,
            task=task[:200],
            after="user",
            step=step.id,
            stream=bool(body.get("stream")),
            **extra,
        )
        text = reply_text(step)
        if not body.get("stream"):
            await asyncio.sleep(step.ttft)
            log.write("reply", id=rid, step=step.id, status="complete", stop_reason=step.stop_reason)
            return JSONResponse(
                {
                    "id": f"chatcmpl-mock-{rid}",
                    "object": "chat.completion",
                    "model": model,
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                    ],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
                }
            )

        async def sse() -> AsyncIterator[bytes]:
            await asyncio.sleep(step.ttft)
            log.write("first_token", id=rid, step=step.id)
            yield _chunk(rid, model, {"role": "assistant", "content": ""})
            size = step.chunk_chars
            for i in range(0, len(text), size):
                yield _chunk(rid, model, {"content": text[i : i + size]})
                await asyncio.sleep(step.chunk_delay)
            yield _chunk(rid, model, {}, "stop")
            yield b"data: [DONE]\n\n"

        def ended(status: str) -> None:
            log.write("reply", id=rid, step=step.id, status=status, stop_reason=step.stop_reason)

        return StreamingResponse(until_end(sse(), ended), media_type="text/event-stream")

    async def models(request: Request) -> Response:
        log.write("request", id=log.next_id(), path=request.url.path, kind="models")
        return JSONResponse({"object": "list", "data": [{"id": "mock-coder", "object": "model"}]})

    async def unknown(request: Request) -> Response:
        log_unknown(log, request)
        return JSONResponse({"error": {"message": f"mock: no route for {request.url.path}"}}, status_code=404)

    routes = [
        Route("/v1/chat/completions", completions, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
    ]
    return mock_app(log, routes, unknown)
