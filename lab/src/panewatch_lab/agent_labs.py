"""What the lab needs to run each non-Claude CLI for real: where it is, its HOME, its mock.

One ``AgentLab`` per CLI, so the capture tool, the canary and the live tests drive Codex,
Gemini and Aider through the same few calls. Pinned versions live here (``.ci/run`` reads
them); the canary installs other versions into a scratch prefix.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from starlette.applications import Starlette

from panewatch_lab import (
    aider_env,
    cline_env,
    codex_env,
    continue_env,
    copilot_env,
    gemini_env,
    gptme_env,
    mock_chat,
    mock_codex,
    mock_gemini,
    mock_tools,
    opencode_env,
    qwen_env,
)

REPO = Path(__file__).resolve().parents[3]


def npm_install_command(package: str, version: str, prefix: Path) -> list[str]:
    """``npm install`` of one pinned (or ``latest``) package into a prefix of its own, quietly."""
    return [
        "npm",
        "install",
        "--prefix",
        str(prefix),
        "--no-fund",
        "--no-audit",
        "--loglevel=error",
        f"{package}@{version}",
    ]


@dataclass(frozen=True)
class AgentLab:
    agent: str
    pinned: str
    #: npm package, or PyPI distribution for ``kind == "pip"``.
    package: str
    kind: str  # "npm" | "pip"
    #: The CLI's executable inside an install prefix.
    relbin: str
    #: (home, project, mock_url) → the CLI's environment (writes its config files).
    prepare: Callable[[Path, Path, str], dict[str, str]]
    #: (binary, project) → argv.
    argv: Callable[[str, Path], list[str]]
    #: (scenario, log path) → the mock API app (``app.state.log`` is a ``TurnLog``).
    mock: Callable[..., Starlette]
    #: (conditions, home, project, env, argv) → argv: a first start's conditions
    #: (``CaptureSpec.start``) made true after ``prepare``; ``env`` is changed in place.
    start_up: Callable[[frozenset[str], Path, Path, dict[str, str], list[str]], list[str]]
    #: The conditions ``start_up`` knows (``git-repo`` is the capture tool's own).
    conditions: frozenset[str]
    #: How an Enter is typed after the text (Ink drops an Enter that arrives with a paste).
    enter_delay: float = 0.05
    #: (home) → None: end what a run leaves behind once its PTY closed (Cline's hub daemon).
    cleanup: Callable[[Path], None] | None = None

    def default_prefix(self) -> Path:
        return REPO / (".lab-npm" if self.kind == "npm" else f".lab-{self.agent}")

    def find(self, prefix: str | Path | None = None) -> str | None:
        env_bin = os.environ.get(f"PANEWATCH_{self.agent.upper()}_BIN")
        if env_bin and prefix is None:
            return env_bin
        path = Path(prefix or self.default_prefix()) / self.relbin
        return str(path) if path.exists() else None

    def version(self, binary: str) -> str | None:
        try:
            out = subprocess.run(
                [binary, "--version"], capture_output=True, text=True, timeout=60, env={**os.environ, "HOME": "/tmp"}
            ).stdout
        except (OSError, subprocess.TimeoutExpired):
            return None
        found = re.search(r"(\d+\.\d+\.\d+(?:[-.][\w.]+)?)", out)
        return found.group(1) if found else None

    def install_command(self, version: str, prefix: Path) -> list[str]:
        if self.kind == "npm":
            return npm_install_command(self.package, version, prefix)
        return [
            str(prefix / "bin" / "pip"),
            "install",
            "-q",
            "--disable-pip-version-check",
            self.package if version == "latest" else f"{self.package}=={version}",
        ]

    def install(self, version: str, prefix: Path) -> str:
        """Install ``version`` into ``prefix``; returns the binary's path."""
        prefix.mkdir(parents=True, exist_ok=True)
        if self.kind == "pip" and not (prefix / "bin" / "pip").exists():
            subprocess.run(["python3", "-m", "venv", str(prefix)], check=True)
        subprocess.run(self.install_command(version, prefix), check=True)
        binary = self.find(prefix)
        if binary is None:
            raise RuntimeError(f"{self.package}@{version} installed but {self.relbin} is missing")
        return binary


LABS: dict[str, AgentLab] = {
    "gemini": AgentLab(
        "gemini",
        gemini_env.PINNED_VERSION,
        gemini_env.PACKAGE,
        "npm",
        "node_modules/.bin/gemini",
        gemini_env.prepare_home,
        lambda binary, project: [binary],
        mock_gemini.build_app,
        gemini_env.start_up,
        frozenset({"untrusted", "no-auth"}),
        enter_delay=0.05,
    ),
    "codex": AgentLab(
        "codex",
        codex_env.PINNED_VERSION,
        codex_env.PACKAGE,
        "npm",
        "node_modules/.bin/codex",
        codex_env.prepare_home,
        codex_env.codex_argv,
        mock_codex.build_app,
        codex_env.start_up,
        frozenset({"untrusted", "no-auth"}),
        enter_delay=0.05,
    ),
    "aider": AgentLab(
        "aider",
        aider_env.PINNED_VERSION,
        aider_env.PACKAGE,
        "pip",
        "bin/aider",
        aider_env.prepare_home,
        aider_env.aider_argv,
        mock_chat.build_app,
        aider_env.start_up,
        frozenset({"git"}),
        enter_delay=0.05,
    ),
    "opencode": AgentLab(
        "opencode",
        opencode_env.PINNED_VERSION,
        opencode_env.PACKAGE,
        "npm",
        "node_modules/.bin/opencode",
        opencode_env.prepare_home,
        opencode_env.opencode_argv,
        mock_tools.build_app,
        opencode_env.start_up,
        frozenset(),
    ),
    "qwen": AgentLab(
        "qwen",
        qwen_env.PINNED_VERSION,
        qwen_env.PACKAGE,
        "npm",
        "node_modules/.bin/qwen",
        qwen_env.prepare_home,
        qwen_env.qwen_argv,
        mock_tools.build_app,
        qwen_env.start_up,
        frozenset({"untrusted"}),
    ),
    "copilot": AgentLab(
        "copilot",
        copilot_env.PINNED_VERSION,
        copilot_env.PACKAGE,
        "npm",
        "node_modules/.bin/copilot",
        copilot_env.prepare_home,
        copilot_env.copilot_argv,
        mock_tools.build_app,
        copilot_env.start_up,
        frozenset({"untrusted"}),
    ),
    "continue": AgentLab(
        "continue",
        continue_env.PINNED_VERSION,
        continue_env.PACKAGE,
        "npm",
        "node_modules/.bin/cn",
        continue_env.prepare_home,
        continue_env.continue_argv,
        mock_tools.build_app,
        continue_env.start_up,
        frozenset({"no-auth"}),
    ),
    "gptme": AgentLab(
        "gptme",
        gptme_env.PINNED_VERSION,
        gptme_env.PACKAGE,
        "pip",
        "bin/gptme",
        gptme_env.prepare_home,
        gptme_env.gptme_argv,
        mock_tools.build_app,
        gptme_env.start_up,
        frozenset({"picker"}),
    ),
    "cline": AgentLab(
        "cline",
        cline_env.PINNED_VERSION,
        cline_env.PACKAGE,
        "npm",
        "node_modules/.bin/cline",
        cline_env.prepare_home,
        cline_env.cline_argv,
        mock_tools.build_app,
        cline_env.start_up,
        frozenset({"promo"}),
        cleanup=cline_env.stop_daemons,
    ),
}


def get_lab(agent: str) -> AgentLab:
    try:
        return LABS[agent]
    except KeyError:
        raise KeyError(f"no lab for agent {agent!r}; known: {', '.join(sorted(LABS))}") from None


def which(name: str) -> str | None:
    return shutil.which(name)
