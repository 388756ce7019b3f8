"""The lab's TOML data (agent scenarios, capture plans): by path, or by bare name from its bundled folder.

A data file changes without a release; naming one by its bare name (``--plan gemini``) or by a
path of the user's own must find it the same way whichever kind it is.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any


def load_toml(ref: str | Path | None, folder: Path, default: str) -> dict[str, Any]:
    """``ref`` if it is a file, else ``folder/<name>.toml`` (``default`` when ``ref`` is empty)."""
    path = Path(ref or default)
    if not path.exists():
        path = folder / (path.name if path.suffix == ".toml" else f"{path.name}.toml")
    with path.open("rb") as fh:
        return tomllib.load(fh)
