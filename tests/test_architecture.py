"""The shape the engine issue asked for, checked so that it stays: the API uses only the façade,
the engine's modules stay small, no function grows past a screen."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "service" / "panewatch"
#: What API modules may import from the package: the façade and the shared vocabulary.
API_MAY_IMPORT = {"engine", "errors", "events", "states", "config", "auth", "metrics", "transcript", "wiring",
                  "manifest", ""}
ENGINE_MODULES = ["engine", "panes", "pane", "scheduler", "guard", "session", "views", "streams", "prompts",
                  "events", "states", "errors", "clock", "wiring", "signals", "metrics"]
INTERNALS = re.compile(r"\.(sessions|watchers|queue|panes|pane|handle|scheduler)\b|engine\._")


def _modules(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "lab" not in p.relative_to(PACKAGE).parts)


@pytest.mark.parametrize("path", _modules(PACKAGE / "api"), ids=lambda p: p.name)
def test_api_modules_use_only_the_facade(path: Path) -> None:
    source = path.read_text()
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 2:
            assert (node.module or "").split(".")[0] in API_MAY_IMPORT, f"{path.name} imports {node.module}"
    for number, line in enumerate(source.splitlines(), 1):
        assert not INTERNALS.search(line), f"{path.name}:{number} reaches into the engine: {line.strip()}"


@pytest.mark.parametrize("name", ENGINE_MODULES + ["api/" + p.stem for p in _modules(PACKAGE / "api")]
                         + ["hosts/" + p.stem for p in _modules(PACKAGE / "hosts")]
                         + ["integrations/" + p.stem for p in _modules(PACKAGE / "integrations")])
def test_engine_modules_stay_under_400_lines(name: str) -> None:
    lines = len((PACKAGE / f"{name}.py").read_text().splitlines())
    assert lines <= 400, f"{name}.py has {lines} lines"


def test_no_function_of_the_runtime_package_passes_60_lines() -> None:
    long = []
    for path in _modules(PACKAGE):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > 60:
                    long.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name} ({length} lines)")
    assert long == []
