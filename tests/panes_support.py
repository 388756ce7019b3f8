"""Claude-like screens as bytes, for tests that play the agent themselves (memory host, panes)."""

from __future__ import annotations

RULE = "─" * 40
PROMPT = (
    f"{RULE}\r\n Bash command\r\n   touch x.txt\r\n Do you want to proceed?\r\n"
    " ❯ 1. Yes\r\n   2. No\r\n Esc to cancel · Tab to amend"
).encode()
ERASE_PROMPT = b"\r\x1b[6A\x1b[J"
WORKING = "✻ Working… (esc to interrupt)\r\n".encode()
IDLE = f"\x1b[2J\x1b[H{RULE}\r\n❯ \r\n{RULE}\r\n  ? for shortcuts".encode()
