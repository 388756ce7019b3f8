"""The prompt id: an answer that names a prompt lands on that prompt only, never on a newer one.

The memory host and a hand-moved clock: the test plays the agent, asks twice in a row, and
answers the second prompt with the first prompt's id, as a stale notification would.
"""

from __future__ import annotations

import pytest

from engine_support import TESTER, memory_rig
from panes_support import ERASE_PROMPT, PROMPT, WORKING
from panewatch.errors import PromptGone
from panewatch.panes.prompts import prompt_id

pytestmark = pytest.mark.unit


@pytest.fixture
async def rig():
    async with memory_rig() as rig:
        yield rig


async def test_a_stale_prompt_id_is_refused_and_the_newer_prompt_stays_untouched(rig):
    notes = []
    rig.engine.notifier.subscribe(notes.append)
    sid, agent = await rig.create()
    agent.emit(WORKING)
    await rig.settle()
    agent.emit(PROMPT)
    await rig.settle()
    first = (await rig.engine.screen(sid)).prompt.id
    agent.on_input = lambda data: agent.emit(ERASE_PROMPT + WORKING)
    result = await rig.engine.answer(sid, option=1, prompt_id=first, actor=TESTER)
    assert result.took and bytes(agent.input) == b"1"

    await rig.settle(1.0)  # it works a while, then asks again: the same rule, a new prompt
    agent.on_input = None
    agent.emit(PROMPT)
    await rig.settle()
    second = (await rig.engine.screen(sid)).prompt.id
    assert second != first and (await rig.engine.get(sid)).state == "blocked"
    # the answer reset the cooldown: the second prompt rang (and would be pushed) at once
    assert [n.state for n in notes if n.state == "blocked"] == ["blocked", "blocked"]

    with pytest.raises(PromptGone, match="this prompt is gone") as refused:
        await rig.engine.answer(sid, option=2, prompt_id=first, actor=TESTER)
    assert refused.value.status == 409 and refused.value.decision.state == "blocked"
    assert bytes(agent.input) == b"1"  # nothing reached the newer prompt
    assert (await rig.engine.screen(sid)).prompt.id == second
    assert (await rig.engine.prompt(sid)).id == second  # the prompt alone, as a push reads it

    agent.on_input = lambda data: agent.emit(ERASE_PROMPT + WORKING)
    result = await rig.engine.answer(sid, option=2, prompt_id=second, actor=TESTER)
    assert result.took and bytes(agent.input) == b"12"


async def test_a_prompt_id_for_a_pane_that_is_not_blocked_is_gone(rig):
    sid, agent = await rig.create()
    agent.emit(WORKING)
    await rig.settle()
    with pytest.raises(PromptGone):
        await rig.engine.answer(sid, option=1, prompt_id="0" * 20, actor=TESTER)
    assert bytes(agent.input) == b""


def test_the_id_names_session_since_and_request():
    base = prompt_id("s1", 1000.0, "permission_dialog")
    assert base == prompt_id("s1", 1000.0, "permission_dialog")  # stable: a notification can carry it
    others = {prompt_id("s2", 1000.0, "permission_dialog"), prompt_id("s1", 1000.5, "permission_dialog")}
    others.add(prompt_id("s1", 1000.0, "trust_dialog"))
    assert base not in others and len(others) == 3
