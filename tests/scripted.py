"""Small scripted agents for tests: bash scripts that draw Claude-like screens.

They draw with Claude's habits that matter to a detector (a horizontal rule, the dialog's
footer, an Ink-style erase with cursor-up + ``ESC[J``) but take a second to read, unlike the
lab's fake agent, which is the realistic stand-in.
"""

from __future__ import annotations

RULE = "─" * 40

PROMPT = (
    f"printf '%s\\r\\n' '{RULE}'; "
    "printf ' Bash command\\r\\n   touch x.txt\\r\\n Do you want to proceed?\\r\\n'; "
    "printf ' \\xe2\\x9d\\xaf 1. Yes\\r\\n   2. No\\r\\n Esc to cancel \\xc2\\xb7 Tab to amend'"
)
ERASE_PROMPT = "printf '\\r\\x1b[6A\\x1b[J'"
WORKING = "printf '\\xe2\\x9c\\xbb Working\\xe2\\x80\\xa6 (esc to interrupt)\\r\\n'"
IDLE = f"printf '%s\\r\\n\\xe2\\x9d\\xaf \\r\\n%s\\r\\n  ? for shortcuts' '{RULE}' '{RULE}'"


def claude_like(*, prompt_after: float = 0.3, work: float = 0.5, key_needs_enter: bool = False) -> str:
    """A turn: work, a permission prompt answered by one key (Claude's menus), work, idle."""
    read = "read -r key" if key_needs_enter else "read -rsn1 key"
    return "; ".join(
        [
            "stty -echo",
            WORKING,
            f"sleep {prompt_after}",
            PROMPT,
            read,
            ERASE_PROMPT,
            "printf ' answered %s\\r\\n' \"$key\"",
            WORKING,
            f"sleep {work}",
            "printf '\\x1b[2J\\x1b[H'",
            IDLE,
            "read -r next",
            "printf '\\r\\n got %s\\r\\n' \"$next\"",
            "sleep 30",
        ]
    )


def stubborn_prompt() -> str:
    """A prompt that ignores every key."""
    return "; ".join(["stty -echo -icanon", PROMPT, "while :; do read -rsn1 -t 1 k; done"])
