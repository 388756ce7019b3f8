"""The runtime wheel carries the runtime only; the lab is its own distribution that plugs in.

Both wheels are built as `pip install .` / `pip install ./lab` build them (not editable), and
their file lists are read; the CLI's plugin seam is run with and without the lab.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from panewatch import cli, plugins

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    out = tmp_path_factory.mktemp("wheels")
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(REPO), str(REPO / "lab")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    found = {w.name.split("-")[0]: zipfile.ZipFile(w).namelist() for w in out.glob("*.whl")}
    assert set(found) == {"panewatch", "panewatch_lab"}, found.keys()
    return found


@pytest.mark.integration
def test_the_runtime_wheel_has_no_lab_bench_or_fake_manifest(wheels: dict[str, list[str]]) -> None:
    names = wheels["panewatch"]
    assert "panewatch/cli.py" in names and "panewatch/manifests/claude.toml" in names
    assert any(n.startswith("panewatch/web/") for n in names)  # the dashboard is served from the wheel
    offending = [
        n for n in names if "lab" in n.split("/")[-1] or "bench" in n or "fake" in n or n.startswith("panewatch/lab/")
    ]
    assert offending == []
    assert not any(n.startswith("panewatch_lab/") for n in names)


@pytest.mark.integration
def test_the_lab_wheel_has_the_lab_its_data_and_the_plugin_entry_points(wheels: dict[str, list[str]]) -> None:
    names = set(wheels["panewatch_lab"])
    assert {
        "panewatch_lab/cli.py",
        "panewatch_lab/bench.py",
        "panewatch_lab/fake_agent.py",
        "panewatch_lab/manifests/fake.toml",
        "panewatch_lab/scenarios/basic.toml",
        "panewatch_lab/captures/claude.toml",
        "panewatch_lab/wording/claude-2.1.332.toml",
    } <= names
    assert not any(n.startswith("panewatch/") for n in names)


@pytest.mark.integration
def test_the_installed_lab_plugs_lab_and_bench_in() -> None:
    pytest.importorskip("panewatch_lab", reason="the lab is not installed (pip install -e ./lab)")
    eps = {ep.name: ep.value for ep in entry_points(group=plugins.GROUP)}
    assert eps.get("lab") == "panewatch_lab.cli:main" and eps.get("bench") == "panewatch_lab.bench:main"
    r = subprocess.run(
        [sys.executable, "-m", "panewatch", "lab", "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert r.returncode == 0 and "usage: panewatch lab COMMAND" in r.stdout


@pytest.mark.unit
def test_without_the_lab_its_commands_say_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(plugins, "entry_points", lambda **_: [])  # as in an environment without panewatch-lab
    for name in ("lab", "bench"):
        assert cli.main([name, "capture", "--help"]) == cli.EXIT_USAGE
        err = capsys.readouterr().err
        assert f"panewatch {name}: not installed" in err and "pip install ./lab" in err and "panewatch-lab" in err
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert "lab" in out and "bench" in out and "not installed" in out


@pytest.mark.unit
def test_fixtures_are_found_from_the_working_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from panewatch.fixtures import default_root

    monkeypatch.chdir(tmp_path)
    assert default_root() == tmp_path / "fixtures"
    assert cli.main(["fixtures"]) == cli.EXIT_USAGE  # none here: a usage error naming where it looked
    monkeypatch.chdir(REPO)
    assert default_root() == REPO / "fixtures"
