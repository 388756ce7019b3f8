"""A mock of OpenAI chat completions *with tool calls*, for the CLIs that speak it natively.

opencode, Qwen Code, Copilot CLI, Cline and the other OpenAI-compatible agents send their own
tools with every main request (``bash``, ``run_shell_command``, ``run_commands``, ``write``,
``editor``…) and run whatever tool call the reply makes, asking the user first when their
permission settings say so. This mock answers a typed ``task:<id>`` from a scenario
(``scenarios/tools.toml`` by default): a text reply, or a call to the request's own shell or
write tool, picked from ``tools`` by name and with its arguments filled from that tool's JSON
schema (the command, the path, the content; anything else required gets a value valid for its
schema). After the tool's result comes back, the step's ``after = "tool"`` reply ends the turn.

Requests without tools are side requests (a title, a summary, a classifier): they get a short
text at once and are logged ``kind = "side"``, so the turn log (``agent_scenario.last_turn``)
reads only the conversation's own turns, as for the other mocks.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
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

DEFAULT_SCENARIO = "tools"
MODEL = "mock-coder"

#: Tool names that run a shell command, most specific first (each CLI names its own).
SHELL_TOOLS = (
    "bash",
    "run_shell_command",
    "run_commands",
    "shell",
    "execute_command",
    "run_terminal_cmd",
    "powershell",
    "exec",
)
#: Tool names that write a whole file.
WRITE_TOOLS = (
    "write",
    "write_file",
    "create_file",
    "editor",
    "create",
    "edit",
    "str_replace_editor",
    "file_edit",
    "save",
)
#: Argument names, by what they carry.
COMMAND_ARGS = ("command", "cmd", "commands", "script")
PATH_ARGS = ("filePath", "file_path", "filepath", "absolute_path", "path", "filename", "target_file")
CONTENT_ARGS = ("content", "new_text", "file_text", "text", "contents", "newContent", "code")
#: A working directory named in a system prompt (to make a written path absolute).
_CWD = re.compile(
    r"(?i)(?:working (?:in (?:the )?)?directory|current (?:working )?directory|cwd)\W{0,12}(/[^\s`'\"<>,;)]+)"
)


def _tool_name(tool: Any) -> str:
    if not isinstance(tool, dict):
        return ""
    fn = tool.get("function") if isinstance(tool.get("function"), dict) else tool
    return str(fn.get("name") or "")


def _tool_schema(tool: dict[str, Any]) -> dict[str, Any]:
    fn = tool.get("function") if isinstance(tool.get("function"), dict) else tool
    schema = fn.get("parameters") or fn.get("input_schema") or {}
    return schema if isinstance(schema, dict) else {}


def pick_tool(tools: list[Any], names: tuple[str, ...]) -> dict[str, Any] | None:
    """The request's tool with the first of ``names`` (case-insensitive, exact), if it has one."""
    by_name = {_tool_name(t).lower(): t for t in tools if _tool_name(t)}
    for name in names:
        if name in by_name:
            return by_name[name]  # type: ignore[no-any-return]
    return None


def working_dir(body: dict[str, Any]) -> str | None:
    """The working directory the agent told the model about (its system prompt), if any."""
    for message in body.get("messages") or []:
        if isinstance(message, dict) and message.get("role") in ("system", "developer", "user"):
            for text in content_texts(message.get("content")):
                found = _CWD.search(text or "")
                if found:
                    return found.group(1).rstrip(".:")
    return None


def fill_arguments(schema: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """Arguments for a tool: ``values`` where the schema has a property of that name (an array
    property gets a one-element list), a value valid for its schema for every other required one."""
    props = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    args: dict[str, Any] = {}
    for name, prop in props.items():
        prop = prop if isinstance(prop, dict) else {}
        if name in values:
            value = values[name]
            if prop.get("type") == "array" and not isinstance(value, list):
                value = [value]
            args[name] = value
        elif name in required:
            args[name] = schema_value(prop)
    return args


def _first(props: dict[str, Any], names: tuple[str, ...]) -> str | None:
    return next((n for n in names if n in props), None)


def tool_call(step: AgentStep, body: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(tool name, arguments) of the call that ends a tool step, from the request's own tools."""
    tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
    if step.shell:
        tool = pick_tool(tools, SHELL_TOOLS)
        if tool is None:
            return None
        props = _tool_schema(tool).get("properties") or {}
        values: dict[str, Any] = {n: step.shell for n in COMMAND_ARGS}
        for name in ("description", "reason", "summary", "explanation"):
            values[name] = "Run the lab's command"
        schema = _tool_schema(tool)
        for name in ("timeout", "timeout_ms"):  # only where required: units differ (Qwen's are ms)
            if name in props and name in (schema.get("required") or []):
                values[name] = 120000 if "ms" in name or "millisecond" in str(props[name]).lower() else 120
        if "is_background" in props:
            values["is_background"] = False
        if "requires_approval" in props:
            values["requires_approval"] = True
        return _tool_name(tool), fill_arguments(_tool_schema(tool), values)
    if step.write:
        tool = pick_tool(tools, WRITE_TOOLS)
        if tool is None:
            return None
        schema = _tool_schema(tool)
        props = schema.get("properties") or {}
        path = step.write["path"]
        key = _first(props, PATH_ARGS)
        desc = str((props.get(key) or {}).get("description", "")) if key else ""
        cwd = working_dir(body)
        if cwd and not os.path.isabs(path) and (key in ("filePath", "absolute_path") or "absolute" in desc.lower()):
            path = os.path.join(cwd, path)
        values = {n: path for n in PATH_ARGS}
        values.update({n: step.write["content"] for n in CONTENT_ARGS})
        if "command" in props:  # an editor tool with sub-commands (create / str_replace / view)
            enum = (props["command"] or {}).get("enum") or []
            values["command"] = "create" if "create" in enum or not enum else enum[0]
        return _tool_name(tool), fill_arguments(schema, values)
    return None


def read_request(body: dict[str, Any]) -> tuple[str, str]:
    """(typed task, "user" | "tool"): the user's last words, and whether the newest message is a
    tool's result (the model's turn after the tool ran) or the user's."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    after = "tool" if messages and messages[-1].get("role") == "tool" else "user"
    for message in reversed(messages):
        if message.get("role") == "user":
            text = typed_text(content_texts(message.get("content")))
            if text:
                found = re.search(r"task:[\w-]+(?: \d+)?", text)
                return (found.group(0) if found else text.strip()[:200]), after
    return "", after


def _chunk(rid: int, model: str, delta: dict[str, Any], finish: str | None = None) -> bytes:
    data = {
        "id": f"chatcmpl-mock-{rid}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(data).encode() + b"\n\n"


def _usage_chunk(rid: int, model: str) -> bytes:
    data = {
        "id": f"chatcmpl-mock-{rid}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 20, "total_tokens": 1020},
    }
    return b"data: " + json.dumps(data).encode() + b"\n\n"


def build_app(
    scenario: AgentScenario | str | Path | None = None, log_path: str | Path | None = None, log_bodies: bool = False
) -> Starlette:
    scen = scenario if isinstance(scenario, AgentScenario) else load_agent_scenario(scenario or DEFAULT_SCENARIO)
    log = TurnLog(log_path, bodies=log_bodies)

    async def completions(request: Request) -> Response:
        rid = log.next_id()
        body = await read_json(request)
        if body is None:
            log.write("request", id=rid, path=request.url.path, kind="bad")
            return JSONResponse({"error": {"message": "body must be a JSON object"}}, status_code=400)
        model = str(body.get("model") or MODEL)
        stream = bool(body.get("stream"))
        extra = {"body": body} if log.bodies else {}
        task, after = read_request(body)
        if not body.get("tools"):  # a title, a summary, a classifier: not the conversation's turn
            log.write("request", id=rid, path=request.url.path, kind="side", task=task[:200], stream=stream, **extra)
            return await _reply(rid, model, "Lab task", None, stream, AgentStep(id="side"), log, side=True)
        step = scen.choose(task, after)
        call = tool_call(step, body)
        log.write(
            "request",
            id=rid,
            path=request.url.path,
            kind="main",
            model=model,
            task=task[:200],
            after=after,
            step=step.id,
            stream=stream,
            tool=call[0] if call else None,
            tools=[_tool_name(t) for t in body.get("tools") or []][:40],
            **extra,
        )
        if (step.shell or step.write) and call is None:
            text = f"(mock: no shell/write tool among {[_tool_name(t) for t in body.get('tools') or []]})"
            return await _reply(
                rid, model, text, None, stream, step.model_copy(update={"shell": None, "write": None}), log
            )
        return await _reply(rid, model, step.text, call, stream, step, log)

    async def models(request: Request) -> Response:
        log.write("request", id=log.next_id(), path=request.url.path, kind="models")
        return JSONResponse({"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "lab"}]})

    async def unknown(request: Request) -> Response:
        log_unknown(log, request)
        return JSONResponse({"error": {"message": f"mock: no route for {request.url.path}"}}, status_code=404)

    routes = [
        Route("/v1/chat/completions", completions, methods=["POST"]),
        Route("/chat/completions", completions, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/models", models, methods=["GET"]),
    ]
    return mock_app(log, routes, unknown)


async def _reply(
    rid: int,
    model: str,
    text: str,
    call: tuple[str, dict[str, Any]] | None,
    stream: bool,
    step: AgentStep,
    log: TurnLog,
    side: bool = False,
) -> Response:
    """The step's reply, streamed (SSE chunks, tool-call deltas) or whole."""
    stop = "tool_calls" if call else "stop"
    stop_reason = "tool_use" if call else "end_turn"
    tool_calls = (
        [
            {
                "index": 0,
                "id": f"call_mock_{rid}",
                "type": "function",
                "function": {"name": call[0], "arguments": json.dumps(call[1])},
            }
        ]
        if call
        else None
    )

    def ended(status: str) -> None:
        if not side:
            log.write("reply", id=rid, step=step.id, status=status, stop_reason=stop_reason)

    if not stream:
        try:
            await asyncio.sleep(0 if side else step.ttft)
        except asyncio.CancelledError:
            ended("cancelled")
            raise
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if tool_calls:
            message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"} for c in tool_calls]
        ended("complete")
        return JSONResponse(
            {
                "id": f"chatcmpl-mock-{rid}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": stop}],
                "usage": {"prompt_tokens": 1000, "completion_tokens": 20, "total_tokens": 1020},
            }
        )

    async def sse() -> AsyncIterator[bytes]:
        await asyncio.sleep(0 if side else step.ttft)
        if not side:
            log.write("first_token", id=rid, step=step.id)
        yield _chunk(rid, model, {"role": "assistant", "content": ""})
        size = step.chunk_chars
        for i in range(0, len(text), size):
            yield _chunk(rid, model, {"content": text[i : i + size]})
            await asyncio.sleep(step.chunk_delay)
        if tool_calls:
            yield _chunk(rid, model, {"tool_calls": tool_calls})
        yield _chunk(rid, model, {}, stop)
        yield _usage_chunk(rid, model)
        yield b"data: [DONE]\n\n"

    return StreamingResponse(until_end(sse(), ended), media_type="text/event-stream")
