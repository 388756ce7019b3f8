"""Read models: one session's screen (with the prompt's options) and its explanation; the agents."""

from __future__ import annotations

from typing import Any

from . import acp_sessions
from .manifest import ManifestStore
from .pane import Pane
from .prompts import read_prompt
from .session import Session
from .states import Decision, Source, State


def prompt_view(session: Session, store: ManifestStore, lines: list[str]) -> dict[str, Any] | None:
    """The prompt of a blocked pane (None when not blocked), derived from the matched rule."""
    pane = session.pane
    decision = pane.decision
    if decision.state != State.blocked:
        return None
    if session.host == "acp":
        return acp_sessions.prompt(session)
    rule = decision.rule if decision.source == Source.screen else pane.verdict.rule
    manifest = pane.manifest(store)
    screen = pane.screen
    return read_prompt(lines, title=screen.title, cursor_row=screen.cursor.row, manifest=manifest, rule=rule).as_dict()


def screen_view(session: Session, store: ManifestStore, *, styles: bool = False) -> dict[str, Any]:
    """``GET /api/sessions/{id}/screen`` and the screen WebSocket's frames."""
    screen, decision = session.pane.screen, session.pane.decision
    cursor = screen.cursor
    lines = screen.lines()
    view: dict[str, Any] = {
        "rows": lines,
        "cursor": {"row": cursor.row, "col": cursor.col, "hidden": cursor.hidden},
        "size": {"rows": screen.rows, "cols": screen.cols},
        "state": str(decision.state),
        "rule": decision.decided_by,
        "source": str(decision.source),
        "title": screen.title,
        "prompt": prompt_view(session, store, lines),
    }
    if styles:
        view["styles"] = screen.styles()
    return view


def out_of_band(pane: Pane, now: float) -> dict[str, Any]:
    """What the agent said besides its screen: title, OSC 7501 status (with its age and whether
    it still counts), OSC 9;4 progress and its last desktop notifications (OSC 9/99/777)."""
    oob = getattr(pane.screen, "oob", None)
    status = oob.status if oob is not None else None
    return {
        "title": pane.screen.title,
        "status": None
        if status is None
        else {
            "state": status.state,
            "raw": status.raw,
            "kind": status.kind,
            "app": status.app,
            "age_s": round(now - pane.status_at, 3),
            "counts": pane.status_at >= pane.screen_changed_at,
        },
        "progress": None
        if oob is None or oob.progress is None
        else {"state": oob.progress.state, "value": oob.progress.value},
        "notifications": []
        if oob is None
        else [{"protocol": n.protocol, "title": n.title, "body": n.body} for n in oob.notifications],
    }


def explain_view(session: Session, decision: Decision, store: ManifestStore, now: float) -> dict[str, Any]:
    """``GET /api/sessions/{id}/explain``: every rule against the screen, and the other signals."""
    pane = session.pane
    if session.host == "acp":  # no rules were read: the protocol said it
        return {
            "agent": session.spec.agent,
            "manifest_version": None,
            "screen_verdict": None,
            "decision": {
                **decision.as_dict(),
                "event": decision.event,
                "program": decision.program,
                "exit_code": decision.exit_code,
                "since": decision.since,
            },
            "signals": {"acp": "the state is the Agent Client Protocol's own; no screen rule is read"},
            "rules": [],
            "rows": pane.screen.lines(),
        }
    manifest = pane.manifest(store)
    lines = pane.screen.lines()
    traces = manifest.explain(lines, pane.screen.title, pane.screen.cursor.row) if manifest else []
    report, verdict = pane.report, pane.verdict
    return {
        "agent": manifest.agent if manifest else None,
        "manifest_version": manifest.manifest.version if manifest else None,
        "screen_verdict": {
            "state": verdict.state,
            "rule": verdict.rule,
            "why": verdict.why,
            "evidence": verdict.evidence,
        },
        "decision": {
            **decision.as_dict(),
            "event": decision.event,
            "program": decision.program,
            "exit_code": decision.exit_code,
            "since": decision.since,
        },
        "signals": {
            "report": None
            if report is None
            else {"state": str(report.state), "event": report.event, "age_s": round(now - report.at, 3)},
            "foreground": pane.fg.program.name if pane.fg.program else None,
            "shell_back": pane.shell_back(),
            "out_of_band": out_of_band(pane, now),
        },
        "rules": [
            {
                "name": t.name,
                "state": t.state,
                "region": t.region,
                "matched": t.matched,
                "evidence": t.evidence,
                "reason": t.reason,
            }
            for t in traces
        ],
        "rows": lines,
    }


def agents_view(store: ManifestStore) -> dict[str, Any]:
    """``GET /api/agents``: each loaded manifest in short, and every refused one with its reason."""
    out = []
    for name in store.agents():
        m = store.get(name)
        if m is None:
            continue
        out.append(
            {
                "agent": name,
                "version": m.manifest.version,
                "description": m.manifest.description,
                "processes": m.manifest.processes,
                "command": m.manifest.command,
                "hooks": m.manifest.hooks,
                "rules": [r.rule.name for r in m.rules],
            }
        )
    return {"agents": out, "errors": [e.as_dict() for e in store.errors.values()]}
