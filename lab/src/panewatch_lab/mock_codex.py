"""A mock of the OpenAI Responses API (``POST /v1/responses``, SSE) that Codex CLI talks to.

Codex is pointed here by a ``[model_providers.mock]`` entry in ``CODEX_HOME/config.toml``.
A shell step becomes an ``exec_command`` call: a plain ``function_call`` when the request
offers that function, else (the default model's "code mode", where the only tool is the
custom JS tool ``exec``) a ``custom_tool_call`` whose input awaits ``tools.exec_command``.
Unsandboxed steps ask for ``require_escalated`` permissions, which is what makes Codex show
its approval under ``approval_policy = "on-request"``. Requests with a json_schema text
format (the thread title) are side requests and get JSON valid for the schema.
"""

from __future__ import annotations

import asyncio
import itertools
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
    content_texts,
    load_agent_scenario,
    schema_value,
    typed_text,
)
from panewatch_lab.mock_http import TurnLog, log_unknown, mock_app, read_json, until_end

_OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")


def read_input(body: dict[str, Any]) -> tuple[str, str, str]:
    """(typed task, "user"|"tool", tool output) from a request's ``input`` items."""
    items = [i for i in body.get("input") or [] if isinstance(i, dict)]
    after, result = "user", ""
    if items and items[-1].get("type") in _OUTPUTS:
        after, result = "tool", json.dumps(items[-1].get("output"))[:300]
    task = ""
    for item in reversed(items):
        if item.get("type", "message") == "message" and item.get("role") == "user":
            task = typed_text(content_texts(item.get("content")))
            if task and not task.lstrip().startswith("<"):
                break
    return task, after, result


def offers_function(body: dict[str, Any], name: str) -> bool:
    return any(isinstance(t, dict) and t.get("name") == name for t in body.get("tools") or [])


def _sse(kind: str, **data: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


_USAGE = {
    "input_tokens": 100,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 10,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 110,
}


def tool_item(step: AgentStep, body: dict[str, Any], call_id: str) -> dict[str, Any]:
    args: dict[str, Any] = {"cmd": step.shell, "workdir": None}
    if not step.sandboxed:
        args |= {
            "sandbox_permissions": "require_escalated",
            "justification": f"The task needs `{step.shell}` to run outside the sandbox.",
        }
    args = {k: v for k, v in args.items() if v is not None}
    if offers_function(body, "exec_command") or not body.get("input"):
        return {
            "type": "function_call",
            "id": f"fc_{call_id}",
            "call_id": call_id,
            "name": "exec_command",
            "arguments": json.dumps(args),
        }
    return {
        "type": "custom_tool_call",
        "id": f"ctc_{call_id}",
        "call_id": call_id,
        "name": "exec",
        "input": f"const r = await tools.exec_command({json.dumps(args)});\ntext(r);\n",
    }


def build_app(
    scenario: AgentScenario | str | Path | None = None, log_path: str | Path | None = None, log_bodies: bool = False
) -> Starlette:
    scen = scenario if isinstance(scenario, AgentScenario) else load_agent_scenario(scenario)
    log = TurnLog(log_path, bodies=log_bodies)
    calls = itertools.count(1)

    async def responses(request: Request) -> Response:
        rid = log.next_id()
        body = await read_json(request)
        if body is None:
            log.write("request", id=rid, path=request.url.path, kind="bad")
            return JSONResponse({"error": {"message": "body must be a JSON object"}}, status_code=400)
        extra = {"body": body} if log.bodies else {}
        resp_id = f"resp_mock_{rid}"
        fmt = (body.get("text") or {}).get("format") or {}
        if fmt.get("type") == "json_schema":
            log.write("request", id=rid, path=request.url.path, kind="side", model=body.get("model"), **extra)
            text = json.dumps(schema_value(fmt.get("schema")))
            step: AgentStep = AgentStep(id="side", text=text, chunk_chars=10_000, ttft=0)
            kind = "side"
        else:
            task, after, result = read_input(body)
            step = scen.choose(task, after)
            kind = "main"
            log.write(
                "request",
                id=rid,
                path=request.url.path,
                kind="main",
                model=body.get("model"),
                task=task[:200],
                after=after,
                result=result,
                step=step.id,
                tools=[t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)],
                **extra,
            )

        async def sse() -> AsyncIterator[bytes]:
            yield _sse("response.created", response={"id": resp_id, "status": "in_progress"})
            await asyncio.sleep(step.ttft)
            if kind == "main":
                log.write("first_token", id=rid, step=step.id)
            index = 0
            chunks = step.chunks()
            if chunks:
                item_id = f"msg_{rid}"
                yield _sse(
                    "response.output_item.added",
                    output_index=0,
                    item={"type": "message", "id": item_id, "role": "assistant", "content": []},
                )
                for text in chunks:
                    yield _sse(
                        "response.output_text.delta", item_id=item_id, output_index=0, content_index=0, delta=text
                    )
                    await asyncio.sleep(step.chunk_delay)
                yield _sse(
                    "response.output_item.done",
                    output_index=0,
                    item={
                        "type": "message",
                        "id": item_id,
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": step.text, "annotations": []}],
                    },
                )
                index = 1
            if step.shell:
                item = tool_item(step, body, f"call_{next(calls)}")
                yield _sse("response.output_item.added", output_index=index, item=item)
                yield _sse("response.output_item.done", output_index=index, item=item)
            yield _sse("response.completed", response={"id": resp_id, "status": "completed", "usage": _USAGE})

        def ended(status: str) -> None:
            log.write("reply", id=rid, step=step.id, status=status, stop_reason=step.stop_reason)

        events = until_end(sse(), ended) if kind == "main" else sse()
        return StreamingResponse(events, media_type="text/event-stream")

    async def models(request: Request) -> Response:
        log.write("request", id=log.next_id(), path=request.url.path, kind="models")
        return JSONResponse({"object": "list", "data": [{"id": "gpt-5.5-codex", "object": "model"}], "models": []})

    async def unknown(request: Request) -> Response:
        raw = await request.body()
        log_unknown(log, request, body=raw[:500].decode(errors="replace"))
        return JSONResponse({"error": {"message": f"mock: no route for {request.url.path}"}}, status_code=404)

    routes = [
        Route("/v1/responses", responses, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
    ]
    return mock_app(log, routes, unknown)
