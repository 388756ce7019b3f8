"""The wrappers table: a session's argv split into wrappers in front and the agent's own argv."""

from __future__ import annotations

import pytest

from panewatch.procs.wrappers import Launch, split_launch, wrappers

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("argv", "prefix", "agent", "switches"),
    [
        (["claude", "--permission-mode", "plan"], [], ["claude", "--permission-mode", "plan"], False),
        (["sudo", "-u", "agent", "--", "claude", "-p"], ["sudo", "-u", "agent", "--"], ["claude", "-p"], True),
        (["sudo", "-Eu", "agent", "claude"], ["sudo", "-Eu", "agent"], ["claude"], True),  # a cluster
        (["sudo", "-uagent", "claude"], ["sudo", "-uagent"], ["claude"], True),  # attached value
        (["/usr/bin/sudo", "--user=agent", "codex"], ["/usr/bin/sudo", "--user=agent"], ["codex"], True),
        (
            ["runuser", "-u", "agent", "--", "nice", "-n", "5", "claude"],
            ["runuser", "-u", "agent", "--", "nice", "-n", "5"],
            ["claude"],
            True,
        ),
        (["env", "A=1", "B=2", "gemini", "-y"], ["env", "A=1", "B=2"], ["gemini", "-y"], False),
        (["timeout", "-s", "INT", "2h", "aider"], ["timeout", "-s", "INT", "2h"], ["aider"], False),
        (["bash", "-c", "claude --resume x"], [], ["bash", "-c", "claude --resume x"], False),  # opaque
    ],
)
def test_split(argv: list[str], prefix: list[str], agent: list[str], switches: bool) -> None:
    launch = split_launch(argv)
    assert launch == Launch(tuple(prefix), tuple(agent), switches)
    assert launch.with_agent(launch.agent) == argv  # nothing lost


@pytest.mark.parametrize(
    "argv",
    [
        ["runuser", "agent", "-c", "claude"],  # a user and a shell string: no argv to find
        ["sudo", "-l"],  # no command at all
        ["env"],
    ],
)
def test_a_wrapper_whose_command_cannot_be_found_has_no_agent(argv: list[str]) -> None:
    launch = split_launch(argv)
    assert launch.agent == ()
    assert launch.prefix == tuple(argv)
    assert launch.program == ""


def test_every_bundled_wrapper_says_why_it_is_listed() -> None:
    table = wrappers()
    assert {"sudo", "runuser", "env"} <= set(table)
    assert all(w.reason.strip() for w in table.values())
    assert {p for p, w in table.items() if w.switches_user} == {"sudo", "runuser", "doas", "setpriv"}
