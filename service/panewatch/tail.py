"""The detector Panewatch replaces: the same rules over the stripped last bytes of output.

Kept only to be measured against the emulated screen (``panewatch fixtures``, the lab's
evaluation): it never sees words placed by ``CSI n G``, and it keeps reporting a prompt that
was erased until enough new output pushes the old bytes out of its window.
"""

from __future__ import annotations

import re

TAIL_BYTES = 8192

_ESCAPES = re.compile(
    r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC
    r"|\x1b[P_^X].*?(?:\x07|\x1b\\)"  # DCS / APC / PM / SOS
    r"|\x1b\[[0-?]*[ -/]*[@-~]"  # CSI
    r"|\x1b[ -/]*[0-~]",  # other ESC sequences
    re.S,
)


def strip_tail(raw: bytes, size: int = TAIL_BYTES) -> list[str]:
    """The last ``size`` bytes with escapes removed, keeping what follows the last CR of each line."""
    text = raw[-size:].decode("utf-8", "replace")
    text = _ESCAPES.sub("", text)
    return [line.rsplit("\r", 1)[-1] for line in text.split("\n")]
