"""Write captures into a fixture folder: ``NAME.raw`` files and the ``truth.toml`` beside them.

The format is the one ``panewatch.fixtures`` reads (and validates here before writing), so a
folder the lab writes is a folder ``panewatch fixtures`` and the tests can check.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Sequence
from pathlib import Path

from panewatch.fixtures import TRUTH_FILE, FixtureTruth, TruthFile

#: Order of the entries: the states as people look for them.
STATE_ORDER = {"blocked": 0, "working": 1, "idle": 2}


def _toml_str(value: str) -> str:
    # a JSON string is a valid TOML basic string (same escapes, \uXXXX included)
    return json.dumps(value, ensure_ascii=False)


def render_truth(truth: TruthFile) -> str:
    """``truth.toml`` text: header keys, then one ``[[fixture]]`` table per capture."""
    out = [
        "# Raw captures of the real CLI with their true state, written by `panewatch lab capture`:",
        "# each label was checked on the replayed screen and against the mock API's log.",
        f"agent = {_toml_str(truth.agent)}",
        f"agent_version = {_toml_str(truth.agent_version)}",
        f"how = {_toml_str(truth.how)}",
    ]
    for fx in truth.fixture:
        out += [
            "",
            "[[fixture]]",
            f"file = {_toml_str(fx.file)}",
            f"state = {_toml_str(fx.state)}",
            f"rows = {fx.rows}",
            f"cols = {fx.cols}",
            f"kind = {_toml_str(fx.kind)}",
            f"note = {_toml_str(fx.note)}",
        ]
    return "\n".join(out) + "\n"


def read_truth(folder: Path) -> TruthFile | None:
    path = Path(folder) / TRUTH_FILE
    if not path.exists():
        return None
    return TruthFile.model_validate(tomllib.loads(path.read_text(encoding="utf-8")))


def write_folder(
    folder: Path, agent: str, version: str, how: str, files: Sequence[tuple[FixtureTruth, bytes]], replace_all: bool
) -> TruthFile:
    """Write the raw files and the truth file.

    ``replace_all``: the folder becomes exactly these captures (other ``.raw`` files are
    deleted as stale). Otherwise earlier entries for other files are kept and ``how`` notes
    both runs.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    entries = {fx.file: fx for fx, _ in files}
    old = None if replace_all else read_truth(folder)
    if old is not None and (old.agent, old.agent_version) == (agent, version):
        for fx in old.fixture:
            if fx.file not in entries and (folder / fx.file).exists():
                entries[fx.file] = fx
        how = f"{old.how}; then {how}"
    for fx, data in files:
        (folder / fx.file).write_bytes(data)
    if replace_all:
        for stale in folder.glob("*.raw"):
            if stale.name not in entries:
                stale.unlink()
    ordered = sorted(entries.values(), key=lambda f: (STATE_ORDER.get(f.state, 9), f.kind, -f.cols, -f.rows, f.file))
    truth = TruthFile(agent=agent, agent_version=version, how=how, fixture=ordered)
    text = render_truth(truth)
    TruthFile.model_validate(tomllib.loads(text))  # what we write must read back
    (folder / TRUTH_FILE).write_text(text, encoding="utf-8")
    return truth
