"""Turn a scenario step into what the Messages API sends: SSE events or one JSON message.

Kept apart from the HTTP layer so the event order and the chunking can be tested without a
server: the CLI assembles tool input from ``input_json_delta`` fragments exactly as it
would from the real API, so the fragments must concatenate to valid JSON.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from panewatch_lab.scenario import Conversation, Pacing, Step, fill


@dataclass(frozen=True)
class Event:
    """One SSE event, sent ``delay`` seconds after the previous one."""

    delay: float
    name: str
    data: dict[str, Any]

    def encode(self) -> bytes:
        return f"event: {self.name}\ndata: {json.dumps(self.data, ensure_ascii=False)}\n\n".encode()


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


def schema_example(schema: dict[str, Any], name: str = "value") -> Any:
    """A small value valid for a JSON schema (the CLI's side requests ask for structured output)."""
    kind = schema.get("type")
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "object":
        props = schema.get("properties") or {}
        return {key: schema_example(sub, key) for key, sub in props.items()}
    if kind == "array":
        return [schema_example(schema.get("items") or {"type": "string"}, name)]
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return False
    return f"mock {name}"


def reply_text(step: Step, body: dict[str, Any]) -> str:
    """The step's text, unless the request demands JSON of a schema the text does not parse as."""
    fmt = (body.get("output_config") or {}).get("format") or {}
    if fmt.get("type") != "json_schema":
        return step.text
    try:
        json.loads(step.text)
        return step.text
    except ValueError:
        return json.dumps(schema_example(fmt.get("schema") or {}))


def content_blocks(step: Step, conv: Conversation, body: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The final content of the reply, as a non-streaming response lists it."""
    blocks: list[dict[str, Any]] = []
    text = reply_text(step, body or {})
    if step.thinking:
        blocks.append({"type": "thinking", "thinking": step.thinking, "signature": "mock-signature"})
    if text:
        blocks.append({"type": "text", "text": text})
    for call in step.tools:
        blocks.append(
            {
                "type": "tool_use",
                "id": f"toolu_{uuid.uuid4().hex[:24]}",
                "name": call.name,
                "input": fill(call.input, conv),
            }
        )
    return blocks


def usage(body: dict[str, Any], output: str) -> dict[str, int]:
    return {
        "input_tokens": _tokens(json.dumps(body.get("messages", []))),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": _tokens(output),
    }


def message(step: Step, conv: Conversation, body: dict[str, Any]) -> dict[str, Any]:
    """A complete non-streaming Messages API response."""
    blocks = content_blocks(step, conv, body)
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "claude-mock"),
        "content": blocks,
        "stop_reason": step.stop_reason,
        "stop_sequence": None,
        "usage": usage(body, json.dumps(blocks)),
    }


def events(msg: dict[str, Any], pacing: Pacing) -> Iterator[Event]:
    """The SSE events that stream ``msg`` (from ``message``), with pings while 'thinking'."""
    start = {**msg, "content": [], "stop_reason": None, "usage": {**msg["usage"], "output_tokens": 1}}
    yield Event(0.0, "message_start", {"type": "message_start", "message": start})
    waited = 0.0
    while pacing.ping_every > 0 and waited + pacing.ping_every < pacing.ttft:
        yield Event(pacing.ping_every, "ping", {"type": "ping"})
        waited += pacing.ping_every
    first_delay = max(0.0, pacing.ttft - waited)
    for index, block in enumerate(msg["content"]):
        kind = block["type"]
        if kind == "thinking":
            opening = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": c} for c in _chunks(block["thinking"], pacing.chunk_chars)]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "text":
            opening = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": c} for c in _chunks(block["text"], pacing.chunk_chars)]
        else:
            opening = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            raw = json.dumps(block["input"], ensure_ascii=False)
            deltas = [{"type": "input_json_delta", "partial_json": c} for c in _chunks(raw, pacing.chunk_chars)]
        yield Event(
            first_delay if index == 0 else 0.0,
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": opening},
        )
        for n, delta in enumerate(deltas):
            yield Event(
                0.0 if n == 0 else pacing.chunk_delay,
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        yield Event(0.0, "content_block_stop", {"type": "content_block_stop", "index": index})
    if not msg["content"] and first_delay > 0:
        yield Event(first_delay, "ping", {"type": "ping"})
    yield Event(
        0.0,
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": msg["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": msg["usage"]["output_tokens"]},
        },
    )
    yield Event(0.0, "message_stop", {"type": "message_stop"})
