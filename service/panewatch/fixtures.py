"""Raw PTY captures with their truth: what each fixture folder holds and how to read it.

A folder ``fixtures/<agent>/<agent-version>/`` holds ``NAME.raw`` files (every byte the agent
wrote, nothing added) and one ``truth.toml`` giving, per file, the true state and the
terminal size it was captured at.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .states import RULE_STATES, State

TRUTH_FILE = "truth.toml"


class FixtureTruth(BaseModel):
    model_config = ConfigDict(extra="forbid")

    file: str
    state: State
    rows: int = Field(ge=2, le=500)
    cols: int = Field(ge=10, le=1000)
    kind: str = ""
    note: str = ""

    @field_validator("state")
    @classmethod
    def _screen_state(cls, value: State) -> State:
        if value not in RULE_STATES:
            raise ValueError(f"a screen shows blocked, working or idle, not {value}")
        return value


class TruthFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent: str
    agent_version: str
    how: str = Field(min_length=1, description="How the captures were made (command, date).")
    fixture: list[FixtureTruth]


@dataclass(frozen=True)
class Fixture:
    path: Path
    agent: str
    agent_version: str
    truth: FixtureTruth

    @property
    def name(self) -> str:
        return self.path.name

    def read(self) -> bytes:
        return self.path.read_bytes()


def load_folder(folder: Path) -> list[Fixture]:
    """The fixtures of one folder, in the order its truth file lists them."""
    folder = Path(folder)
    truth = TruthFile.model_validate(tomllib.loads((folder / TRUTH_FILE).read_text(encoding="utf-8")))
    return [Fixture(folder / t.file, truth.agent, truth.agent_version, t) for t in truth.fixture]


def find_folders(root: Path) -> list[Path]:
    """Every folder under ``root`` (itself included) that has a truth file."""
    root = Path(root)
    return sorted(p.parent for p in root.rglob(TRUTH_FILE))


def default_root() -> Path:
    """``fixtures/`` of the working directory: captures belong to a checkout, not to the wheel
    (installed, this file sits in site-packages, where no fixture is)."""
    return Path.cwd() / "fixtures"
