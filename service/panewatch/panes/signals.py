"""Combining what the screen, the agent's own hooks and statuses and the process table say about a pane.

The order is fixed and deliberate:

1. a ``blocked`` read from the screen always holds: a prompt on screen is the one alert that
   must never be suppressed, whatever a (possibly stale) report says;
2. then the agent's own out-of-band ``blocked`` status (OSC 7501 ``state=blocked``): Codex
   0.171.0 says it 0.67–0.79 s *before* its screen reads blocked (measured with
   ``python -m panewatch_lab.oob_timing``, notes/agents-lab.md), and an agent says it only
   while it waits;
3. then a fresh report from the agent's hooks: exact when it exists, but it can be missing
   (a hook failed) or stale (``Stop`` does not fire when the user interrupts with Esc), so it
   only counts inside a freshness window *and* only until the screen's verdict changes after it;
4. then the agent's out-of-band working/idle status (OSC 7501 ``working``/``done``/``idle``):
   ``working`` comes 3–124 ms before the screen's (median 43 ms) and ``done`` with it, so it
   catches work the screen shows only briefly (Codex's sub-second turns); like a report
   it counts only until the screen's verdict changes after it, so a status left behind by a
   crashed agent cannot pin a state;
5. then "the shell is back in the foreground": the agent exited, its last screen may linger;
6. then the other screen rules (working, idle, or idle because nothing matched) — except that a
   screen no rule matches while the agent is still starting (its manifest's ``startup_timeout``,
   and no rule has matched since launch) is ``working`` with source ``start``: a blank screen
   before the agent drew its input box is not "waiting for you"; and that a shell pane whose
   terminal another program holds (``sleep 100``, a build) is ``working`` with source
   ``process``: the shell is not back, so it is not done.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..manifest import Verdict
from ..oob import Status
from ..states import Decision, Source, State
from .asks import Request

__all__ = ["Decision", "Report", "combine", "report_is_fresh"]


@dataclass(frozen=True)
class Report:
    """A state an agent reported about itself (from a hook), and when."""

    state: State
    event: str  # hook event name, or "report" for a plain {"state": ...}
    at: float  # loop time it arrived
    detail: str = ""
    request: Request | None = None  # what a blocked report says is asked (PermissionRequest)


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
    shell_busy: str | None = None,
    exit_code: int | None = None,
    exited: bool = False,
    starting: bool = False,
    status: Status | None = None,
    status_at: float = float("-inf"),
) -> Decision:
    """The pane's state from its signals, in the order the module docstring gives."""
    if exited:
        return Decision(State.exited, Source.exit, f"the process exited with code {exit_code}", exit_code=exit_code)
    if screen.state == State.blocked:
        return Decision(State.blocked, Source.screen, screen.why, rule=screen.rule)
    status_fresh = status is not None and status_at >= screen_changed_at
    if status is not None and status_fresh and status.state == State.blocked:
        return Decision(
            State.blocked,
            Source.status,
            f"the agent says it is blocked ({status.kind or 'no kind'}) out of band",
            event=f"osc7501:{status.raw}",
        )
    if report is not None and report_is_fresh(report, now, freshness, screen_changed_at):
        return Decision(
            report.state, Source.hook, report.detail or f"the agent reported {report.event}", event=report.event
        )
    if status is not None and status_fresh:
        return Decision(
            status.state,
            Source.status,
            f"the agent says {status.raw} out of band",
            event=f"osc7501:{status.raw}",
        )
    if shell_back:
        return Decision(State.idle, Source.process, f"{shell_back} is back in the foreground", program=shell_back)
    if starting and screen.rule is None:
        return Decision(State.working, Source.start, "starting: the agent has drawn nothing its manifest knows yet")
    if shell_busy and screen.rule is None:
        return Decision(
            State.working,
            Source.process,
            f"{shell_busy} holds the terminal; the shell waits for it",
            program=shell_busy,
        )
    return Decision(screen.state, Source.screen, screen.why, rule=screen.rule)
