"""The canary's verdict table: drift is any capture read wrong or refused, named by its rule."""

from __future__ import annotations

import pytest

from panewatch_lab.canary import Row, table

pytestmark = pytest.mark.unit


def test_drift_is_named_and_the_table_has_every_size() -> None:
    rows = [
        Row("bash", "32x120", "blocked", "blocked", "tool_confirmation", ""),
        Row("bash", "24x80", "blocked", "idle", None, "no rule matched"),
        Row("thinking", "32x120", "working", "idle", "input_box", "Type your message"),
        Row("fresh", "24x80", "idle", "refused", None, "screen lacks 'Type your message'"),
    ]
    text = table(rows, [(32, 120), (24, 80)])
    assert "| bash | blocked | blocked (tool_confirmation) | **idle** (no rule matched) |" in text
    assert "| thinking | working | **idle** (input_box) | – |" in text
    assert "**refused**" in text
    assert [r.drift for r in rows] == [False, True, True, True]
