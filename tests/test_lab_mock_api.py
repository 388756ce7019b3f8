"""The lab's mock Messages API, served by a real uvicorn and read with httpx as the CLI reads it."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from panewatch_lab import stream
from panewatch_lab.loopback import Loopback
from panewatch_lab.mock_api import build_app
from panewatch_lab.scenario import Scenario, load_scenario, read_conversation

SCENARIO = """
description = "test"
[pacing]
ttft = 0.0
chunk_chars = 5
chunk_delay = 0.0
ping_every = 0.0

[[steps]]
id = "hello"
when = { task = "task:hello", after = "user" }
text = "Hello there, general."

[[steps]]
id = "bash"
when = { task = "task:bash", after = "user" }
text = "Running it."
tools = [{ name = "Bash", input = { command = "touch x.txt", description = "Create x.txt" } }]

[[steps]]
id = "bash-denied"
when = { task = "task:bash", after = "Bash", error = true }
text = "Not running it."

[[steps]]
id = "bash-done"
when = { task = "task:bash", after = "Bash" }
text = "Done."

[[steps]]
id = "write"
when = { task = "task:write", after = "user" }
tools = [{ name = "Write", input = { file_path = "{cwd}/notes.txt", content = "a\\nb\\n" } }]

[[steps]]
id = "slow"
when = { task = "task:slow", after = "user" }
text = "Thought hard."
pacing = { ttft = 0.35, ping_every = 0.1 }

[[steps]]
id = "long"
when = { task = "task:long", after = "user" }
text = "01234567890123456789"
pacing = { chunk_chars = 1, chunk_delay = 0.03 }

[[steps]]
id = "side-title"
when = { kind = "side", system = "naming a coding session" }
text = '{"title": "Lab session"}'
"""

TOOLS = [{"name": "Bash", "input_schema": {"type": "object"}}]
SYSTEM_TEXT = "You are Claude Code.\n - Primary working directory: /work/proj\n"


def body(
    *messages: dict[str, Any], stream_: bool = True, tools: list[Any] | None = TOOLS, **extra: Any
) -> dict[str, Any]:
    return {
        "model": "claude-opus-5-5",
        "max_tokens": 1000,
        "stream": stream_,
        "tools": tools,
        "system": [{"type": "text", "text": SYSTEM_TEXT}],
        "messages": list(messages),
        **extra,
    }


def user(text: str) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [
            {"type": "text", "text": "<system-reminder>\nnot typed\n</system-reminder>\n"},
            {"type": "text", "text": text},
        ],
    }


def tool_round(task: str, name: str, result: str, error: bool = False) -> list[dict[str, Any]]:
    return [
        user(task),
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": name, "input": {}}]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": result, "is_error": error}],
        },
    ]


async def sse(client: httpx.AsyncClient, payload: dict[str, Any]) -> list[tuple[float, str, dict[str, Any]]]:
    """POST and parse the event stream into (arrival time, event name, data)."""
    events: list[tuple[float, str, dict[str, Any]]] = []
    async with client.stream("POST", "/v1/messages?beta=true", json=payload) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        name = ""
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                data = json.loads(line[len("data: ") :])
                assert data["type"] == name
                events.append((time.monotonic(), name, data))
    return events


class Served:
    def __init__(self, app: Any, port: int, log: Path) -> None:
        self.app, self.log = app, log
        self.client = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10)

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()]


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    scenario_file = tmp_path / "scenario.toml"
    scenario_file.write_text(SCENARIO)
    log = tmp_path / "mock.jsonl"
    app = build_app(scenario_file, log)
    async with Loopback().serving(app) as lb:
        live = Served(app, lb.port, log)
        try:
            yield live
        finally:
            await live.client.aclose()


def names(events: list[tuple[float, str, dict[str, Any]]]) -> list[str]:
    return [name for _, name, _ in events]


@pytest.mark.integration
async def test_text_reply_streams_events_in_api_order(served: Served) -> None:
    events = await sse(served.client, body(user("task:hello")))
    seq = names(events)
    assert seq[0] == "message_start" and seq[-2:] == ["message_delta", "message_stop"]
    middle = seq[1:-2]
    assert middle[0] == "content_block_start" and middle[-1] == "content_block_stop"
    assert set(middle[1:-1]) == {"content_block_delta"} and len(middle) - 2 == 5  # 21 chars / 5
    text = "".join(d["delta"]["text"] for _, n, d in events if n == "content_block_delta")
    assert text == "Hello there, general."
    start = events[0][2]["message"]
    assert start["role"] == "assistant" and start["content"] == [] and start["stop_reason"] is None
    assert events[-2][2]["delta"]["stop_reason"] == "end_turn"


@pytest.mark.integration
async def test_tool_use_input_is_assembled_from_json_deltas(served: Served) -> None:
    events = await sse(served.client, body(user("task:bash please")))
    starts = [d for _, n, d in events if n == "content_block_start"]
    assert [s["content_block"]["type"] for s in starts] == ["text", "tool_use"]
    tool_block = starts[1]["content_block"]
    assert tool_block["name"] == "Bash" and tool_block["id"].startswith("toolu_") and tool_block["input"] == {}
    fragments = [d["delta"] for _, n, d in events if n == "content_block_delta" and d["index"] == 1]
    assert all(f["type"] == "input_json_delta" for f in fragments) and len(fragments) > 1
    assert json.loads("".join(f["partial_json"] for f in fragments)) == {
        "command": "touch x.txt",
        "description": "Create x.txt",
    }
    assert events[-2][2]["delta"]["stop_reason"] == "tool_use"
    # every block that starts also stops, with matching indexes
    stops = [d["index"] for _, n, d in events if n == "content_block_stop"]
    assert stops == [0, 1]


@pytest.mark.integration
@pytest.mark.parametrize(
    ("messages", "step"),
    [
        (tool_round("task:bash", "Bash", "(Bash completed with no output)"), "bash-done"),
        (
            tool_round("task:bash", "Bash", "The user doesn't want to proceed with this tool use.", error=True),
            "bash-denied",
        ),
        # after a denial the CLI sends the rejection and the next typed words in one message
        (
            [
                *tool_round("task:bash", "Bash", "rejected", error=True)[:2],
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "rejected", "is_error": True},
                        {"type": "text", "text": "[Request interrupted by user for tool use]\n"},
                        {"type": "text", "text": "task:hello"},
                    ],
                },
            ],
            "hello",
        ),
        ([user("something else")], "fallback"),
    ],
)
async def test_step_is_chosen_from_the_conversation(served: Served, messages: list[Any], step: str) -> None:
    events = await sse(served.client, body(*messages))
    assert events[-1][1] == "message_stop"
    requests = [r for r in served.records() if r["event"] == "request"]
    assert requests[-1]["step"] == step


@pytest.mark.integration
async def test_tool_input_paths_use_the_cli_working_directory(served: Served) -> None:
    events = await sse(served.client, body(user("task:write")))
    raw = "".join(d["delta"]["partial_json"] for _, n, d in events if n == "content_block_delta")
    assert json.loads(raw)["file_path"] == "/work/proj/notes.txt"


@pytest.mark.integration
async def test_time_to_first_token_is_filled_with_pings(served: Served) -> None:
    t0 = time.monotonic()
    events = await sse(served.client, body(user("task:slow")))
    seq = names(events)
    first_block = seq.index("content_block_start")
    assert seq[1:first_block] == ["ping", "ping", "ping"]
    assert events[first_block][0] - t0 >= 0.33


@pytest.mark.integration
async def test_chunks_are_paced(served: Served) -> None:
    events = await sse(served.client, body(user("task:long")))
    deltas = [t for t, n, _ in events if n == "content_block_delta"]
    assert len(deltas) == 20
    assert deltas[-1] - deltas[0] >= 19 * 0.03 * 0.9


@pytest.mark.integration
async def test_side_request_with_json_schema_gets_valid_json(served: Served) -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    payload = body(
        user("<conversation>plan</conversation>"),
        tools=[],
        stream_=False,
        output_config={"format": {"type": "json_schema", "schema": schema}},
    )
    reply = (await served.client.post("/v1/messages", json=payload)).json()
    assert reply["type"] == "message" and reply["stop_reason"] == "end_turn"
    assert json.loads(reply["content"][0]["text"]) == {"name": "mock name"}
    # a scripted side step wins when its system prompt matches
    payload["system"] = "You are naming a coding session so the user can pick it out"
    reply = (await served.client.post("/v1/messages", json=payload)).json()
    assert json.loads(reply["content"][0]["text"]) == {"title": "Lab session"}


@pytest.mark.integration
async def test_count_tokens_models_and_unknown_paths(served: Served) -> None:
    r = await served.client.post("/v1/messages/count_tokens?beta=true", json=body(user("x" * 400)))
    assert r.status_code == 200 and r.json()["input_tokens"] > 100
    r = await served.client.get("/v1/models")
    assert r.status_code == 200 and any(m["id"].startswith("claude-") for m in r.json()["data"])
    r = await served.client.head("/api/hello")
    assert r.status_code == 404
    r = await served.client.post("/api/event_logging/batch", json={"events": []})
    assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"
    paths = [(r["path"], r.get("unknown", False)) for r in served.records() if r["event"] == "request"]
    assert paths == [
        ("/v1/messages/count_tokens", False),
        ("/v1/models", False),
        ("/api/hello", True),
        ("/api/event_logging/batch", True),
    ]


@pytest.mark.integration
async def test_log_records_requests_and_replies_with_both_clocks(served: Served) -> None:
    before_wall, before_mono = time.time(), time.monotonic()
    await sse(served.client, body(user("task:bash")))
    await sse(served.client, body(*tool_round("task:bash", "Bash", "ok")))
    records = served.records()
    assert [(r["event"], r["id"], r["step"]) for r in records] == [
        ("request", 1, "bash"),
        ("first_token", 1, "bash"),
        ("reply", 1, "bash"),
        ("request", 2, "bash-done"),
        ("first_token", 2, "bash-done"),
        ("reply", 2, "bash-done"),
    ]
    for r in records:
        assert before_wall <= r["wall"] <= time.time() and before_mono <= r["mono"] <= time.monotonic()
    assert [r["mono"] for r in records] == sorted(r["mono"] for r in records)
    reply = records[2]
    assert reply["status"] == "complete" and reply["stop_reason"] == "tool_use"
    assert reply["content"][1]["name"] == "Bash" and reply["content"][1]["input"]["command"] == "touch x.txt"
    assert records[3]["conversation"]["after"] == "Bash" and records[3]["conversation"]["task"] == "task:bash"


@pytest.mark.integration
async def test_a_reply_the_client_abandons_is_logged_as_cancelled(served: Served) -> None:
    async with served.client.stream("POST", "/v1/messages", json=body(user("task:long"))) as response:
        async for line in response.aiter_lines():
            if "content_block_delta" in line:
                break  # hang up mid-stream, as the CLI does when the user presses Esc
    for _ in range(100):
        replies = [r for r in served.records() if r["event"] == "reply"]
        if replies:
            break
        await asyncio.sleep(0.02)
    assert replies and replies[0]["status"] == "cancelled"


@pytest.mark.unit
def test_bundled_scenario_covers_every_dialog() -> None:
    scenario = load_scenario("basic")
    ids = {s.id for s in scenario.steps}
    assert {"bash", "write", "edit", "ask", "plan", "think", "prose", "ls"} <= ids
    prose = next(s for s in scenario.steps if s.id == "prose")
    assert "Do you want to proceed?\n❯ 1. Yes" in prose.text


@pytest.mark.unit
def test_scenario_rejects_bad_regexes_and_unknown_keys() -> None:
    with pytest.raises(ValidationError):
        Scenario.model_validate({"steps": [{"id": "x", "when": {"task": "("}}]})
    with pytest.raises(ValidationError):
        Scenario.model_validate({"steps": [{"id": "x", "reply": "typo"}]})


@pytest.mark.unit
def test_events_without_a_server_keep_block_indexes_consistent() -> None:
    scenario = Scenario.model_validate(
        {
            "steps": [
                {"id": "t", "thinking": "hmm", "text": "hi", "tools": [{"name": "Bash", "input": {"command": "ls"}}]}
            ]
        }
    )
    conv = read_conversation(body(user("anything")))
    msg = stream.message(scenario.steps[0], conv, {})
    evs = list(stream.events(msg, scenario.pacing))
    kinds = [e.data["content_block"]["type"] for e in evs if e.name == "content_block_start"]
    assert kinds == ["thinking", "text", "tool_use"]
    assert any(e.data.get("delta", {}).get("type") == "signature_delta" for e in evs)
