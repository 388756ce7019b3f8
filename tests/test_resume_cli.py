"""The manifests' ``[resume]`` tables against the pinned CLIs' own ``--help``: every option the
CLI lists is in the table, read the way the CLI reads it, and nothing the table lists is unknown
to it. A table that drifted would keep a flag without its value or take a value for the prompt.
For Codex, whose resume is a subcommand with the launch's options after it, every top-level
option must also be one ``codex resume`` takes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from agent_help_support import Options, options_of
from claude_support import CLAUDE
from panewatch.manifest import ManifestStore, bundled_manifest_dir
from panewatch.procs.resume import ResumeSpec, resume_argv
from panewatch_lab.agent_labs import get_lab

pytestmark = pytest.mark.live

STORE = ManifestStore.from_dirs(bundled_manifest_dir())
#: the agent, and the words before ``--help`` that show the options its resumed command reads
CLIS = {
    "claude": (),
    "codex": ("resume",),
    "gemini": (),
    "qwen": (),
    "opencode": (),
    "copilot": (),
    "cline": (),
    "gptme": (),
}
#: the CLIs whose help is click's (Python), not a Node or Rust parser's
CLICK = {"gptme"}


def table(agent: str) -> ResumeSpec:
    found = STORE.get(agent)
    assert found is not None and isinstance(found.manifest.resume, ResumeSpec)
    return found.manifest.resume


def binary(agent: str) -> str:
    if agent == "claude":  # its lab is the older claude_env module
        if CLAUDE is None:
            pytest.skip("claude not installed (npm install --prefix .lab-npm @anthropic-ai/claude-code@<pinned>)")
        return CLAUDE
    lab = get_lab(agent)
    found = lab.find()
    if found is None:
        pytest.skip(
            f"{agent} {lab.pinned} not installed ({' '.join(lab.install_command(lab.pinned, lab.default_prefix()))})"
        )
    return found


@pytest.mark.parametrize("agent", sorted(CLIS))
def test_the_resume_table_reads_options_as_the_pinned_cli_does(agent: str) -> None:
    cli = options_of(binary(agent), CLIS[agent], click=agent in CLICK)
    spec = table(agent)
    ours = Options(
        frozenset(spec.value_options), frozenset(spec.optional_value), frozenset(spec.variadic), frozenset(spec.flags)
    )
    assert len(cli.every()) > 15, "the help was not parsed"
    for kind in ("value", "optional", "variadic", "flags"):
        assert getattr(ours, kind) == getattr(cli, kind), kind
    assert set(spec.replaces) <= cli.every()


def test_codex_resume_takes_every_option_of_the_top_level_command() -> None:
    codex = binary("codex")
    top, resume = options_of(codex), options_of(codex, ("resume",))
    assert top.every() <= resume.every(), sorted(top.every() - resume.every())
    for kind in ("value", "optional", "variadic", "flags"):
        assert getattr(top, kind) <= getattr(resume, kind), kind


@pytest.mark.parametrize(("option", "named"), [("-s", "--sandbox <SANDBOX_MODE>"), ("-a", "--ask-for-approval")])
def test_the_pinned_codex_reads_a_resumed_launchs_sandbox_and_approvals_where_resume_puts_them(
    option: str, named: str, tmp_path: Path
) -> None:
    # the resumed argv itself, with one value Codex refuses: its error names the option, so the
    # flag reached `codex resume`'s own parser at the place resume put it (after `resume ID`)
    m = table("codex")
    launched = ["codex", "-s", "read-only", "-a", "on-request"]
    at = launched.index(option) + 1
    launched[at] = "not-a-mode"
    argv = resume_argv(launched, m, agent="codex", processes=["codex"], conversation="0199-abc")
    assert argv[:3] == ["codex", "resume", "0199-abc"]
    argv[0] = binary("codex")
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "HOME": str(tmp_path)},  # codex writes ~/.codex/tmp
    )
    assert done.returncode == 2 and f"invalid value 'not-a-mode' for '{named}" in done.stderr, done.stderr
