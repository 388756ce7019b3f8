"""Combining what the screen, the agent's own hooks and the process table say about a pane.

The order is fixed and deliberate:

1. a ``blocked`` read from the screen always holds: a prompt on screen is the one alert that
   must never be suppressed, whatever a (possibly stale) report says;
2. then a fresh report from the agent's hooks: exact when it exists, but it can be missing
   (a hook failed) or stale (``Stop`` does not fire when the user interrupts with Esc), so it
   only counts inside a freshness window *and* only until the screen's verdict changes after it;
3. then "the shell is back in the foreground": the agent exited, its last screen may linger;
4. then the other screen rules (working, idle, or idle because nothing matched).
"""

from __future__ import annotations

from dataclasses import dataclass

from .manifest import Verdict
from .states import Decision, Source, State

__all__ = ["Decision", "Report", "combine", "report_is_fresh"]


@dataclass(frozen=True)
class Report:
    """A state an agent reported about itself (from a hook), and when."""

    state: State
    event: str  # hook event name, or "report" for a plain {"state": ...}
    at: float  # loop time it arrived
    detail: str = ""


def report_is_fresh(report: Report | None, now: float, freshness: float, screen_changed_at: float) -> bool:
    """A report counts while younger than ``freshness`` and not older than the screen's last change."""
    if report is None:
        return False
    return now - report.at <= freshness and report.at >= screen_changed_at


def combine(
    screen: Verdict,
    *,
    report: Report | None = None,
    now: float = 0.0,
    freshness: float = 60.0,
    screen_changed_at: float = float("-inf"),
    shell_back: str | None = None,
    exit_code: int | None = None,
    exited: bool = False,
) -> Decision:
    """The pane's state from its signals, in the order the module docstring gives."""
    if exited:
        return Decision(State.exited, Source.exit, f"the process exited with code {exit_code}", exit_code=exit_code)
    if screen.state == State.blocked:
        return Decision(State.blocked, Source.screen, screen.why, rule=screen.rule)
    if report is not None and report_is_fresh(report, now, freshness, screen_changed_at):
        return Decision(State(report.state), Source.hook, report.detail or f"the agent reported {report.event}",
                        event=report.event)
    if shell_back:
        return Decision(State.idle, Source.process, f"{shell_back} is back in the foreground", program=shell_back)
    return Decision(State(screen.state), Source.screen, screen.why, rule=screen.rule)
