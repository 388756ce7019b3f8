"""ACP agents known by name (``agents.toml`` beside this module): name -> launch command."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

AGENTS_FILE = Path(__file__).with_name("agents.toml")


@dataclass(frozen=True)
class AcpAgent:
    name: str
    command: tuple[str, ...]
    description: str


@cache
def acp_agents(path: Path = AGENTS_FILE) -> dict[str, AcpAgent]:
    with path.open("rb") as fh:
        data = tomllib.load(fh)
    agents: dict[str, AcpAgent] = {}
    for name, entry in data.items():
        command = entry.get("command")
        if not (isinstance(command, list) and command and all(isinstance(c, str) and c for c in command)):
            raise ValueError(f"{path}: [{name}] needs a non-empty command list")
        agents[name] = AcpAgent(name, tuple(command), str(entry.get("description", "")))
    return agents
