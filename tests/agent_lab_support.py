"""The lab's pinned agent CLIs, for the live tests that drive them: one way to find one, or skip."""

from __future__ import annotations

import pytest

from panewatch_lab.agent_labs import LABS, AgentLab


def lab_or_skip(agent: str) -> tuple[AgentLab, str]:
    """The agent's lab and its installed binary; the test is skipped, saying how to install it,
    where the CLI is absent."""
    lab = LABS[agent]
    binary = lab.find()
    if binary is None:
        pytest.skip(f"{agent} CLI not installed ({' '.join(lab.install_command(lab.pinned, lab.default_prefix()))})")
    return lab, binary
