"""Start-up dialogs in the agent labs: the conditions a first start meets (untrusted folder,
no sign-in, Aider allowed git), made true by each lab, and a real Codex dialog cut only when the
screen and the mock's log agree."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from panewatch_lab.agent_capture import capture_one, start_up
from panewatch_lab.agent_labs import get_lab
from panewatch_lab.capture import CaptureRefused
from panewatch_lab.capture_plan import MockTruth, load_plan

CODEX = get_lab("codex").find()
needs_codex = pytest.mark.skipif(
    CODEX is None, reason="codex CLI not installed (npm install --prefix .lab-npm @openai/codex@0.171.0)"
)


def spec_of(agent: str, name: str):
    return next(c for c in load_plan(agent).capture if c.name == name)


@pytest.mark.integration
def test_codex_conditions_undo_trust_and_sign_in(tmp_path: Path) -> None:
    lab = get_lab("codex")
    project = tmp_path / "project"
    project.mkdir()
    env = lab.prepare(tmp_path / "home", project, "http://127.0.0.1:9")
    argv = start_up(lab, spec_of("codex", "blocked-trust-folder"), tmp_path / "home", project, env, ["codex"])
    assert argv == ["codex"] and (project / ".git").is_dir(), "git-repo: Codex asks about trust only in a repository"
    config = tomllib.loads((Path(env["CODEX_HOME"]) / "config.toml").read_text())
    assert "projects" not in config and config["model_provider"] == "mock"
    start_up(lab, spec_of("codex", "blocked-sign-in"), tmp_path / "home", project, env, ["codex"])
    config = tomllib.loads((Path(env["CODEX_HOME"]) / "config.toml").read_text())
    assert "model_provider" not in config and "OPENAI_API_KEY" not in env


@pytest.mark.unit
def test_gemini_and_aider_conditions(tmp_path: Path) -> None:
    gemini, aider = get_lab("gemini"), get_lab("aider")
    project = tmp_path / "project"
    project.mkdir()
    env = gemini.prepare(tmp_path / "home", project, "http://127.0.0.1:9")
    start_up(gemini, spec_of("gemini", "blocked-trust-folder"), tmp_path / "home", project, env, ["gemini"])
    assert (tmp_path / "home/.gemini/trustedFolders.json").read_text() == "{}"
    assert "GEMINI_CLI_NO_RELAUNCH" not in env, "a trust decision restarts the CLI, as a user's does"
    start_up(gemini, spec_of("gemini", "blocked-auth"), tmp_path / "home", project, env, ["gemini"])
    assert '"auth"' not in (tmp_path / "home/.gemini/settings.json").read_text()
    argv = aider.argv("aider", project)
    assert "--no-git" in argv
    assert "--no-git" not in start_up(aider, spec_of("aider", "blocked-create-git-repo"), tmp_path, project, {}, argv)


@pytest.mark.unit
def test_a_condition_the_lab_does_not_know_is_refused(tmp_path: Path) -> None:
    gemini = get_lab("gemini")
    spec = spec_of("gemini", "blocked-auth").model_copy(update={"start": ["git"]})
    with pytest.raises(CaptureRefused, match="cannot start with"):
        start_up(gemini, spec, tmp_path, tmp_path, {}, ["gemini"])


@pytest.mark.live
@needs_codex
def test_a_real_codex_trust_dialog_is_cut_and_a_mislabelled_one_refused() -> None:
    lab, plan = get_lab("codex"), load_plan("codex")
    spec = spec_of("codex", "blocked-trust-folder")
    assert CODEX is not None
    captured = capture_one(lab, plan, spec, CODEX, 24, 80)
    assert captured.file == "blocked-trust-folder-24x80.raw" and b"Trust this folder?" in captured.data
    wrong = spec.model_copy(
        update={
            "kind": "mislabelled",
            "state": "idle",
            "screen": ["Ask Codex to do anything"],
            "mock": MockTruth(turn="done"),
        }
    )
    with pytest.raises(CaptureRefused) as refused:
        capture_one(lab, plan, wrong, CODEX, 24, 80)
    assert "Ask Codex" in refused.value.reason and "mock: the turn is 'none'" in refused.value.reason
