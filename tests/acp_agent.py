"""A tiny scripted ACP agent on stdio, for the client's fault-injection tests.

The prompt's first word picks what the turn does (``hello``, ``perm``, ``slow``, ``nooptions``,
``malformed``, ``unknown``, ``read <path>``, ``readmany <n> <path>...``, ``write <path>``,
``badstop``, ``withdraw``,
``crash``, ``plan``, ``flood``); flags change the agent as a whole (``--silent-init`` never
answers ``initialize``, ``--stdout-logs`` logs to stdout, ``--protocol N`` answers with
another protocol version, ``--ignore-cancel`` never ends a cancelled turn).

    python tests/acp_agent.py [--silent-init] [--stdout-logs] [--protocol N] [--ignore-cancel]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import sys
from typing import Any

ARGS = argparse.Namespace()
SESSION = "sess-scripted-1"
_ids = itertools.count(1000)
_waiting: dict[int, asyncio.Future[Any]] = {}


def out(message: dict[str, Any] | str) -> None:
    line = message if isinstance(message, str) else json.dumps(message)
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def log(text: str) -> None:
    if ARGS.stdout_logs:
        out(f"[scripted-agent] {text}")  # the fault under test: logs on the protocol stream
    print(f"scripted-agent: {text}", file=sys.stderr, flush=True)


def update(update_kind: str, **fields: Any) -> None:
    out(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": SESSION, "update": {"sessionUpdate": update_kind, **fields}},
        }
    )


def say(text: str) -> None:
    update("agent_message_chunk", content={"type": "text", "text": text})


async def ask(method: str, params: Any) -> dict[str, Any]:
    """Send a request to the client; the answer as the raw message (result or error)."""
    rid = next(_ids)
    fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    _waiting[rid] = fut
    out({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
    return await fut


class Turn:
    def __init__(self) -> None:
        self.cancelled = asyncio.Event()


CURRENT: Turn | None = None


async def run_turn(text: str, turn: Turn) -> str:
    word, _, rest = text.strip().partition(" ")
    log(f"turn {word!r}")
    if word == "hello":
        say("Hello ")
        say("from the scripted agent.")
        return "end_turn"
    if word == "plan":
        update("agent_thought_chunk", content={"type": "text", "text": "Thinking about a plan."})
        update(
            "plan",
            entries=[
                {"content": "Read the code", "status": "completed", "priority": "high"},
                {"content": "Write the fix", "status": "in_progress", "priority": "medium"},
            ],
        )
        update("some_future_update_kind", whatever=True)
        say("Planned.")
        return "end_turn"
    if word in ("perm", "withdraw"):
        call = {
            "toolCallId": "call-1",
            "title": "touch marker.txt",
            "kind": "execute",
            "status": "pending",
            "rawInput": {"command": "touch marker.txt"},
        }
        update("tool_call", **call)
        params = {
            "sessionId": SESSION,
            "toolCall": call,
            "options": [
                {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                {"optionId": "allow-always", "name": "Always allow", "kind": "allow_always"},
                {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
            ],
        }
        if word == "withdraw":
            rid = next(_ids)
            out({"jsonrpc": "2.0", "id": rid, "method": "session/request_permission", "params": params})
            await asyncio.sleep(float(rest or 0.3))
            out({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": rid}})
            say("Never mind.")
            return "end_turn"
        asking = asyncio.ensure_future(ask("session/request_permission", params))
        cancelled = asyncio.ensure_future(turn.cancelled.wait())
        await asyncio.wait({asking, cancelled}, return_when=asyncio.FIRST_COMPLETED)
        if turn.cancelled.is_set():
            await asyncio.sleep(0.05)  # the client also answers "cancelled"
            update("tool_call_update", toolCallId="call-1", status="failed")
            return "cancelled"
        answer = asking.result()
        outcome = (answer.get("result") or {}).get("outcome") or {}
        if outcome.get("outcome") == "selected" and outcome.get("optionId", "").startswith("allow"):
            update("tool_call_update", toolCallId="call-1", status="in_progress")
            with open(os.path.join(os.getcwd(), "marker.txt"), "w") as fh:
                fh.write("ran\n")
            update(
                "tool_call_update",
                toolCallId="call-1",
                status="completed",
                content=[{"type": "content", "content": {"type": "text", "text": "created marker.txt"}}],
            )
            say("Done.")
        else:
            update("tool_call_update", toolCallId="call-1", status="failed")
            say(f"Not allowed: {json.dumps(outcome)}")
        return "end_turn"
    if word == "slow":
        try:
            await asyncio.wait_for(turn.cancelled.wait(), float(rest or 30))
        except TimeoutError:
            return "end_turn"
        if ARGS.ignore_cancel:
            await asyncio.sleep(3600)
        return "cancelled"
    if word == "nooptions":
        answer = await ask(
            "session/request_permission",
            {"sessionId": SESSION, "toolCall": {"toolCallId": "call-2", "title": "rm -rf /"}, "options": []},
        )
        say(f"client said: {json.dumps(answer.get('error') or answer.get('result'))}")
        return "end_turn"
    if word == "malformed":
        out('{"foo": 1}')
        out("[1, 2, 3]")
        out('{"jsonrpc": "2.0", "id": 99999}')
        out('{"jsonrpc": "1.0", "id": 5, "method": "x"}')
        say("Sent junk.")
        return "end_turn"
    if word == "unknown":
        a = await ask("weird/method", {"x": 1})
        b = await ask("terminal/create", {"sessionId": SESSION, "command": "ls"})
        say(f"weird: {a.get('error', {}).get('code')}; terminal: {b.get('error', {}).get('code')}")
        return "end_turn"
    if word == "read":
        a = await ask("fs/read_text_file", {"sessionId": SESSION, "path": rest})
        say(json.dumps(a.get("result") or a.get("error")))
        return "end_turn"
    if word == "readmany":  # n reads in flight at once over the paths; says what came back
        count, *paths = rest.split()
        answers = await asyncio.gather(
            *(
                ask("fs/read_text_file", {"sessionId": SESSION, "path": paths[i % len(paths)]})
                for i in range(int(count))
            )
        )
        texts = [a["result"]["content"] for a in answers if "result" in a]
        codes = sorted({a["error"]["code"] for a in answers if "error" in a})
        longest = max((len(t) for t in texts), default=0)
        summary = {"ok": len(texts), "outside": sum("OUTSIDE" in t for t in texts), "codes": codes, "longest": longest}
        say(json.dumps(summary))
        return "end_turn"
    if word == "write":
        path, _, content = rest.partition(" ")
        a = await ask("fs/write_text_file", {"sessionId": SESSION, "path": path, "content": content or "written"})
        say(json.dumps(a.get("result") if "result" in a else a.get("error")))
        return "end_turn"
    if word == "badstop":
        return "!malformed"
    if word == "crash":
        print("scripted-agent: fatal: the model exploded", file=sys.stderr, flush=True)
        os._exit(3)
    if word == "flood":
        for i in range(int(rest or 2000)):
            say(f"chunk {i} ")
        return "end_turn"
    say(f"Unknown task {word!r}.")
    return "end_turn"


async def prompt(rid: Any, params: dict[str, Any], turn: Turn) -> None:
    global CURRENT
    text = "".join(b.get("text", "") for b in params.get("prompt", []) if isinstance(b, dict))
    try:
        stop = await run_turn(text, turn)
    finally:
        CURRENT = None
    if stop == "!malformed":
        out({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": 42}})
    else:
        out({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": stop}})


async def main() -> None:
    global CURRENT
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    log("started")
    tasks: set[asyncio.Task[Any]] = set()
    while True:
        line = await reader.readline()
        if not line:
            log("stdin closed; bye")
            return
        msg = json.loads(line)
        method, rid = msg.get("method"), msg.get("id")
        if method is None:
            fut = _waiting.pop(rid, None)
            if fut is not None and not fut.done():
                fut.set_result(msg)
            continue
        if method == "initialize":
            if ARGS.silent_init:
                log("not answering initialize")
                continue
            out(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "result": {
                        "protocolVersion": ARGS.protocol,
                        "agentCapabilities": {"loadSession": False},
                        "agentInfo": {"name": "scripted", "title": "Scripted agent", "version": "1.0"},
                        "authMethods": [],
                    },
                }
            )
        elif method == "session/new":
            out({"jsonrpc": "2.0", "id": rid, "result": {"sessionId": SESSION}})
        elif method == "session/prompt":
            CURRENT = Turn()  # now, so that a cancel on the very next line finds it
            task = asyncio.ensure_future(prompt(rid, msg.get("params") or {}, CURRENT))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        elif method == "session/cancel":
            log("cancel")
            if CURRENT is not None:
                CURRENT.cancelled.set()
        elif rid is not None:
            out({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no {method}"}})


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--silent-init", action="store_true")
    parser.add_argument("--stdout-logs", action="store_true")
    parser.add_argument("--protocol", type=int, default=1)
    parser.add_argument("--ignore-cancel", action="store_true")
    ARGS = parser.parse_args()
    asyncio.run(main())
