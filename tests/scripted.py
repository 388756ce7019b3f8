"""Small scripted agents for tests: bash scripts that draw Claude-like screens.

They draw with Claude's habits that matter to a detector (a horizontal rule, the dialog's
footer, an Ink-style erase with cursor-up + ``ESC[J``) but take a second to read, unlike the
lab's fake agent, which is the realistic stand-in. Each frame is a synchronized update
(``ESC[?2026h`` … ``ESC[?2026l``), as Claude Code draws on a terminal that answers for mode 2026
(ours does): bash's ``printf`` writes a tty line by line, and half a frame reads otherwise (half
a dialog pushes the working footer out of the bottom rows: idle), which a loaded machine lets
the engine see between two writes.
"""

from __future__ import annotations

RULE = "─" * 40

BEGIN, END = "\\x1b[?2026h", "\\x1b[?2026l"  # a synchronized update (DEC mode 2026)
PROMPT = (
    f"printf '{BEGIN}%s\\r\\n Bash command\\r\\n   touch x.txt\\r\\n Do you want to proceed?\\r\\n"
    f" \\xe2\\x9d\\xaf 1. Yes\\r\\n   2. No\\r\\n Esc to cancel \\xc2\\xb7 Tab to amend{END}' '{RULE}'"
)
WORKING_LINE = "\\xe2\\x9c\\xbb Working\\xe2\\x80\\xa6 (esc to interrupt)"
WORKING = f"printf '{WORKING_LINE}\\r\\n'"
IDLE = f"printf '{BEGIN}\\x1b[2J\\x1b[H%s\\r\\n\\xe2\\x9d\\xaf \\r\\n%s\\r\\n  ? for shortcuts{END}' '{RULE}' '{RULE}'"


def claude_like(
    *, prompt_after: float = 0.3, work: float = 0.5, key_needs_enter: bool = False, gate: str | None = None
) -> str:
    """A turn: work, a permission prompt answered by one key (Claude's menus), work, idle.

    ``gate``: a path; each working phase then lasts until ``gate.1`` (then ``gate.2``) exists,
    not a fixed time, so that a test can let it go on once it has seen the state: on a loaded
    machine a 0.3 s phase can pass between two reads."""
    read = "read -r key" if key_needs_enter else "read -rsn1 key"

    def hold(seconds: float, n: int) -> str:
        return f"while [ ! -e {gate}.{n} ]; do sleep 0.05; done" if gate else f"sleep {seconds}"

    return "; ".join(
        [
            "stty -echo",
            WORKING,
            hold(prompt_after, 1),
            PROMPT,
            read,
            f"printf '{BEGIN}\\r\\x1b[6A\\x1b[J answered %s\\r\\n{WORKING_LINE}\\r\\n{END}' \"$key\"",
            hold(work, 2),
            IDLE,
            "read -r next",
            "printf '\\r\\n got %s\\r\\n' \"$next\"",
            "sleep 30",
        ]
    )


def stubborn_prompt() -> str:
    """A prompt that ignores every key."""
    return "; ".join(["stty -echo -icanon", PROMPT, "while :; do read -rsn1 -t 1 k; done"])
