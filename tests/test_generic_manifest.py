"""The generic manifest: what reads a pane whose program no manifest names.

Its contract is the one a best guess must keep: never read a prompt that is not there. It is run
on every capture of every agent (its own rules, never the agent's): 0 false blocked. Where it is
used (a program no manifest names, never a plain shell), and that ``/explain`` and the session
say so, is checked on the engine's in-memory host.
"""

from __future__ import annotations

from collections import Counter
from functools import lru_cache

import pytest

from capture_support import CAPTURES_GROUP, every_fixture, replayed
from engine_support import memory_rig
from panes_support import IDLE, PROMPT
from panewatch.engine._launch import runs_shell
from panewatch.manifest import ManifestStore, bundled_manifest_dir
from panewatch.procs.procinfo import Program

# one worker for the module and the others that read the captures: they share the replays
# (capture_support.py)
pytestmark = [pytest.mark.unit, pytest.mark.xdist_group(CAPTURES_GROUP)]

STORE = ManifestStore.from_dirs(bundled_manifest_dir())


@lru_cache(maxsize=1)
def _verdicts() -> list[tuple[str, str, str, str | None]]:
    """(fixture, true state, generic's state, rule) for every capture of every agent."""
    generic = STORE.get("generic")
    assert generic is not None
    out = []
    for fx in every_fixture():
        screen = replayed(fx)
        verdict = generic.classify(screen.lines(), screen.title, screen.cursor.row)
        out.append((f"{fx.agent}/{fx.name}", fx.truth.state, verdict.state, verdict.rule))
    return out


def test_generic_never_reads_blocked_where_no_prompt_waits() -> None:
    verdicts = _verdicts()
    agents = Counter(name.split("/")[0] for name, *_ in verdicts)
    assert {"claude", "codex", "gemini", "aider"} <= set(agents), agents
    false_blocked = [v for v in verdicts if v[2] == "blocked" and v[1] != "blocked"]
    assert not false_blocked, false_blocked


def test_generic_finds_most_prompts_of_agents_it_never_names() -> None:
    """Not its contract (its own manifest is each agent's), but it must be worth having: most of
    the start-up and permission prompts of the agents are read blocked by structure alone."""
    prompts = [v for v in _verdicts() if v[1] == "blocked"]
    found = [v for v in prompts if v[2] == "blocked"]
    assert len(found) >= 0.75 * len(prompts), [v for v in prompts if v[2] != "blocked"]


def test_generic_has_no_process_names_and_keeps_blocked_above_working() -> None:
    generic = STORE.get("generic")
    assert generic is not None and generic.manifest.processes == []
    states = [r.rule.state for r in generic.rules]
    assert max(i for i, s in enumerate(states) if s == "blocked") < states.index("working")
    assert generic.manifest.startup_timeout == 0  # a plain program is idle from its first screen


async def test_an_unnamed_program_gets_the_generic_manifest_and_explain_says_so() -> None:
    async with memory_rig() as rig:
        sid, shell = await rig.create(agent=None)
        rig.programs.update({shell.pid: Program(shell.pid, "bash", "bash"), 777: Program(777, "newagent", "newagent")})
        shell.emit(IDLE)
        await rig.settle(2.5)
        assert (await rig.engine.get(sid)).agent == "shell"  # a plain shell keeps the shell's rules
        assert (await rig.engine.explain(sid)).generic is False
        shell.fg_pgid = 777  # the user started an agent nobody wrote rules for
        shell.emit(PROMPT)
        await rig.settle()
        info = await rig.engine.get(sid)
        assert (info.agent, info.state, info.rule) == ("generic", "blocked", "option_menu")
        explained = await rig.engine.explain(sid)
        assert explained.generic is True and "best guess" in explained.note


async def test_what_a_shell_session_runs_stays_the_shells_to_read() -> None:
    """A session launched as a shell (``bash``, ``sh -c …``): ``make`` or ``sleep`` in its
    foreground is read by the shell's rules, never guessed at by the generic manifest."""
    async with memory_rig() as rig:
        sid, shell = await rig.create(agent=None, command="sh")
        rig.programs.update({shell.pid: Program(shell.pid, "sh", "sh"), 777: Program(777, "make", "make")})
        shell.fg_pgid = 777
        shell.emit(PROMPT)
        await rig.settle(2.5)
        assert (await rig.engine.get(sid)).agent == "shell"
        assert (await rig.engine.explain(sid)).generic is False


def test_a_shell_launch_is_seen_through_its_wrappers() -> None:
    assert runs_shell(["bash"]) and runs_shell(["/bin/sh", "-c", "make all"])
    assert runs_shell(["env", "FOO=1", "bash", "-l"])
    assert not runs_shell(["python3", "-c", "input()"]) and not runs_shell(None) and not runs_shell([])
