"""A tap between an ACP client and its agent: forwards stdio both ways unchanged and logs
every line with the wall-clock time it passed, as JSON lines.

The log is the protocol's ground truth for the lab: when the agent *sent* its permission
request, measured outside the service, so the time to ``blocked`` on ``/ws/state`` can be
checked end to end (the tap's own forwarding is counted in it, never hidden).

    python -m panewatch_lab.acp_tap --log /tmp/acp.jsonl -- claude-agent-acp
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import threading
import time
from typing import IO, BinaryIO


def _pump(src: BinaryIO, dst: BinaryIO, direction: str, log: IO[str], lock: threading.Lock) -> None:
    for line in iter(src.readline, b""):
        with lock:
            log.write(
                json.dumps(
                    {"wall": time.time(), "dir": direction, "line": line.decode("utf-8", "replace").rstrip("\n")}
                )
                + "\n"
            )
            log.flush()
        try:
            dst.write(line)
            dst.flush()
        except (BrokenPipeError, ValueError):
            break
    try:
        dst.close()
    except (BrokenPipeError, OSError):
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m panewatch_lab.acp_tap", description=__doc__.split("\n\n")[0])
    parser.add_argument("--log", required=True, help="JSON-lines file: {wall, dir: to_agent|from_agent, line}")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the agent's command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the agent's command after --")
    agent = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    signal.signal(signal.SIGTERM, lambda *_: agent.terminate())
    lock = threading.Lock()
    with open(args.log, "a", buffering=1) as log:
        assert agent.stdin is not None and agent.stdout is not None
        threads = [
            threading.Thread(target=_pump, args=(sys.stdin.buffer, agent.stdin, "to_agent", log, lock), daemon=True),
            threading.Thread(target=_pump, args=(agent.stdout, sys.stdout.buffer, "from_agent", log, lock)),
        ]
        for t in threads:
            t.start()
        code = agent.wait()
        threads[1].join(5)
    return code


if __name__ == "__main__":
    sys.exit(main())
