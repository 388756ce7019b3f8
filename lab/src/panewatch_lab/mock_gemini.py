"""A mock of the Gemini API (``streamGenerateContent?alt=sse``) that Gemini CLI talks to.

The lab sets ``GOOGLE_GEMINI_BASE_URL`` to this server. Main turns are answered from the
scenario (text, or a ``run_shell_command`` / ``write_file`` function call the CLI asks the
user to approve); structured side requests (the model router's ``complexity_score``, the
next-speaker check) get JSON valid for their ``responseJsonSchema``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from panewatch_lab.agent_scenario import (
    AgentScenario,
    AgentStep,
    load_agent_scenario,
    schema_value,
    typed_text,
)
from panewatch_lab.mock_http import TurnLog, log_unknown, mock_app, read_json, until_end


def read_contents(body: dict[str, Any]) -> tuple[str, str, str]:
    """(typed task, "user"|"tool", tool result text) from a request's ``contents``."""
    contents = [c for c in body.get("contents") or [] if isinstance(c, dict)]
    after, result = "user", ""
    if contents:
        parts = contents[-1].get("parts") or []
        responses = [p["functionResponse"] for p in parts if isinstance(p, dict) and "functionResponse" in p]
        if responses:
            after, result = "tool", json.dumps(responses[-1].get("response"))[:300]
    task = ""
    for content in reversed(contents):
        parts = content.get("parts") or []
        if content.get("role") == "user" and not any("functionResponse" in p for p in parts if isinstance(p, dict)):
            task = typed_text([p.get("text", "") for p in parts if isinstance(p, dict) and "text" in p])
            if task:
                break
    return task, after, result


def _schema(body: dict[str, Any]) -> Any:
    config = body.get("generationConfig") or {}
    return config.get("responseJsonSchema") or config.get("responseSchema")


def _chunk(parts: list[dict[str, Any]], model: str, finish: bool) -> bytes:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = "STOP"
    data = {
        "candidates": [candidate],
        "modelVersion": model,
        "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110},
    }
    return b"data: " + json.dumps(data).encode() + b"\r\n\r\n"


def step_parts(step: AgentStep) -> list[dict[str, Any]]:
    """The function call that ends a tool step."""
    if step.shell:
        return [
            {
                "functionCall": {
                    "name": "run_shell_command",
                    "args": {"command": step.shell, "description": f"Run {step.shell}"},
                }
            }
        ]
    if step.write:
        return [
            {
                "functionCall": {
                    "name": "write_file",
                    "args": {"file_path": step.write["path"], "content": step.write["content"]},
                }
            }
        ]
    return []


def build_app(
    scenario: AgentScenario | str | Path | None = None, log_path: str | Path | None = None, log_bodies: bool = False
) -> Starlette:
    scen = scenario if isinstance(scenario, AgentScenario) else load_agent_scenario(scenario)
    log = TurnLog(log_path, bodies=log_bodies)

    async def model_call(request: Request) -> Response:
        rid = log.next_id()
        model, _, method = request.path_params["call"].partition(":")
        body = await read_json(request)
        if body is None:
            log.write("request", id=rid, path=request.url.path, kind="bad", bad_json=True)
            return JSONResponse({"error": {"code": 400, "message": "body must be a JSON object"}}, status_code=400)
        extra = {"body": body} if log.bodies else {}
        if method == "countTokens":
            log.write("request", id=rid, path=request.url.path, kind="count", **extra)
            return JSONResponse({"totalTokens": 100})
        schema = _schema(body)
        if schema is not None or method == "generateContent":
            value = schema_value(schema) if schema is not None else "mock"
            text = value if isinstance(value, str) else json.dumps(value)
            log.write("request", id=rid, path=request.url.path, kind="side", model=model, **extra)
            parts = [{"text": text}]
            if method == "generateContent":
                return JSONResponse(
                    {
                        "candidates": [
                            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
                        ],
                        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
                    }
                )
            return StreamingResponse(iter([_chunk(parts, model, True)]), media_type="text/event-stream")
        task, after, result = read_contents(body)
        step = scen.choose(task, after)
        log.write(
            "request",
            id=rid,
            path=request.url.path,
            kind="main",
            model=model,
            task=task[:200],
            after=after,
            result=result,
            step=step.id,
            **extra,
        )

        async def sse() -> AsyncIterator[bytes]:
            await asyncio.sleep(step.ttft)
            log.write("first_token", id=rid, step=step.id)
            chunks = step.chunks()
            tool = step_parts(step)
            for i, text in enumerate(chunks):
                yield _chunk([{"text": text}], model, finish=not tool and i == len(chunks) - 1)
                await asyncio.sleep(step.chunk_delay)
            if tool or not chunks:
                yield _chunk(tool or [{"text": ""}], model, finish=True)

        def ended(status: str) -> None:
            log.write("reply", id=rid, step=step.id, status=status, stop_reason=step.stop_reason)

        return StreamingResponse(until_end(sse(), ended), media_type="text/event-stream")

    async def models(request: Request) -> Response:
        log.write("request", id=log.next_id(), path=request.url.path, kind="models")
        return JSONResponse({"models": [{"name": "models/gemini-2.5-pro"}, {"name": "models/gemini-2.5-flash"}]})

    async def unknown(request: Request) -> Response:
        log_unknown(log, request)
        return JSONResponse(
            {"error": {"code": 404, "message": f"mock: no route for {request.url.path}"}}, status_code=404
        )

    routes = [
        Route("/{version}/models/{call}", model_call, methods=["POST"]),
        Route("/{version}/models", models, methods=["GET"]),
    ]
    return mock_app(log, routes, unknown)
