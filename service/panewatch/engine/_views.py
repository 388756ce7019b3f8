"""Read models from a session as it is now: its screen (with the prompt), its explanation, the
agents. A terminal is read from its pane; an ACP session shows its conversation as text and its
state is the protocol's."""

from __future__ import annotations

from collections.abc import Sequence

from ..manifest import CompiledManifest, ManifestStore
from ..panes.pane import GENERIC, Pane
from ..panes.prompts import Prompt as ScreenPrompt
from ..panes.prompts import read_prompt
from ..states import Decision, Source, State
from . import _acp
from ._sessions import AcpSession, AnySession, current_prompt_id, request_view
from .models import (
    AgentList,
    AgentSummary,
    Cursor,
    DecisionView,
    DesktopNote,
    Explanation,
    ManifestRefusal,
    OutOfBand,
    ProgressView,
    Prompt,
    PromptOption,
    ProtocolSignals,
    ReportView,
    RuleTraceView,
    ScreenSignals,
    ScreenView,
    Size,
    StatusView,
    StyleRun,
    VerdictView,
)

PROTOCOL_SAYS = "the state is the Agent Client Protocol's own; no screen rule is read"
#: What /explain says when the generic manifest is the one in use.
GENERIC_NOTE = (
    "no manifest names this program: the generic manifest's structural rules (option menus with a key "
    "footer, button rows, y/n questions on the cursor line, spinners, titles) decided, a best guess"
)


def _prompt(found: ScreenPrompt, prompt_id: str) -> Prompt:
    options = [PromptOption.model_validate(o) for o in found.options]
    return Prompt.model_validate({"kind": found.kind, "options": options, "id": prompt_id})


def prompt_view(session: AnySession, store: ManifestStore, lines: list[str]) -> Prompt | None:
    """The prompt of a blocked session (None when not blocked): an ACP session's pending
    permission, a terminal's as derived from the matched rule; with its id either way."""
    if isinstance(session, AcpSession):
        return _acp.prompt(session)
    pane = session.pane
    decision = pane.decision
    if decision.state != State.blocked:
        return None
    rule = decision.rule if decision.source == Source.screen else pane.verdict.rule
    manifest = pane.manifest(store)
    screen = pane.screen
    found = read_prompt(lines, title=screen.title, cursor_row=screen.cursor.row, manifest=manifest, rule=rule)
    # the id an answer names so that it lands on this prompt only (409 once it is gone)
    return _prompt(found, current_prompt_id(session, decision) or "")


def _style_run(run: list[object]) -> StyleRun:
    chars, fg, bg, flags = run
    if not isinstance(chars, int) or not isinstance(flags, int):
        raise TypeError(f"a style run is [chars, fg, bg, flags], not {run!r}")
    return chars, str(fg), str(bg), flags


def styles_of(pane: Pane) -> list[list[StyleRun]]:
    """The screen's style runs, typed (``ScreenLike.styles`` gives lists of four values)."""
    return [[_style_run(run) for run in row] for row in pane.screen.styles()]


def screen_view(session: AnySession, store: ManifestStore, *, styles: bool = False) -> ScreenView:
    """``GET /api/sessions/{id}/screen`` and the screen WebSocket's frames."""
    if isinstance(session, AcpSession):
        return conversation_screen(session, styles=styles)
    screen, decision = session.pane.screen, session.pane.decision
    cursor = screen.cursor
    lines = screen.lines()
    return ScreenView(
        rows=lines,
        cursor=Cursor(row=cursor.row, col=cursor.col, hidden=cursor.hidden),
        size=Size(rows=screen.rows, cols=screen.cols),
        state=decision.state,
        rule=decision.decided_by,
        source=decision.source,
        title=screen.title,
        prompt=prompt_view(session, store, lines),
        request=session.request(),
        styles=styles_of(session.pane) if styles else None,
    )


def conversation_screen(session: AcpSession, *, styles: bool = False) -> ScreenView:
    """An ACP session's screen: the last screenful of its conversation as plain text, the
    cursor after it, the pending permission as the prompt."""
    lines = session.lines()
    body = [line for line in lines if line] or [""]
    rows, cols = session.size
    decision = session.decision
    return ScreenView(
        rows=lines,
        cursor=Cursor(row=len(body) - 1, col=min(len(body[-1]), cols - 1), hidden=False),
        size=Size(rows=rows, cols=cols),
        state=decision.state,
        rule=decision.decided_by,
        source=decision.source,
        title="",
        prompt=_acp.prompt(session),
        request=session.request(),
        styles=[[] for _ in lines] if styles else None,
    )


def out_of_band(pane: Pane, now: float) -> OutOfBand:
    """What the agent said besides its screen: title, OSC 7501 status (with its age and whether
    it still counts), OSC 9;4 progress and its last desktop notifications (OSC 9/99/777)."""
    oob = pane.screen.oob
    status = oob.status
    return OutOfBand(
        title=pane.screen.title,
        status=None
        if status is None
        else StatusView(
            state=status.state,
            raw=status.raw,
            kind=status.kind,
            app=status.app,
            age_s=round(now - pane.status_at, 3),
            counts=pane.status_at >= pane.screen_changed_at,
        ),
        progress=None if oob.progress is None else ProgressView(state=oob.progress.state, value=oob.progress.value),
        notifications=[DesktopNote(protocol=n.protocol, title=n.title, body=n.body) for n in oob.notifications],
    )


def _traces(manifest: CompiledManifest | None, pane: Pane, lines: Sequence[str]) -> list[RuleTraceView]:
    traces = manifest.explain(list(lines), pane.screen.title, pane.screen.cursor.row) if manifest else []
    return [
        RuleTraceView(
            name=t.name, state=t.state, region=t.region, matched=t.matched, evidence=t.evidence, reason=t.reason
        )
        for t in traces
    ]


def explain_view(session: AnySession, decision: Decision, store: ManifestStore, now: float) -> Explanation:
    """``GET /api/sessions/{id}/explain``: every rule against the screen, and the other signals."""
    if isinstance(session, AcpSession):  # no rules were read: the protocol said it
        return Explanation(
            agent=session.spec.agent,
            manifest_version=None,
            generic=False,
            note=None,
            screen_verdict=None,
            decision=DecisionView.of(decision),
            request=session.request(),
            signals=ProtocolSignals(acp=PROTOCOL_SAYS),
            rules=[],
            rows=session.lines(),
        )
    pane = session.pane
    manifest = pane.manifest(store)
    lines = pane.screen.lines()
    report, verdict = pane.report, pane.verdict
    generic = manifest is not None and manifest.agent == GENERIC
    return Explanation(
        agent=manifest.agent if manifest else None,
        manifest_version=manifest.manifest.version if manifest else None,
        # no manifest names the program in the pane: the verdict is the generic rules' best guess
        generic=generic,
        note=GENERIC_NOTE if generic else None,
        screen_verdict=VerdictView(state=verdict.state, rule=verdict.rule, why=verdict.why, evidence=verdict.evidence),
        decision=DecisionView.of(decision),
        request=session.request(),
        signals=ScreenSignals(
            report=None
            if report is None
            else ReportView(
                state=report.state,
                event=report.event,
                age_s=round(now - report.at, 3),
                request=request_view(report.request),
            ),
            foreground=pane.fg.program.name if pane.fg.program else None,
            shell_back=pane.shell_back(),
            out_of_band=out_of_band(pane, now),
        ),
        rules=_traces(manifest, pane, lines),
        rows=lines,
    )


def agents_view(store: ManifestStore) -> AgentList:
    """``GET /api/agents``: each loaded manifest in short, and every refused one with its reason."""
    out = []
    for name in store.agents():
        m = store.get(name)
        if m is None:
            continue
        out.append(
            AgentSummary(
                agent=name,
                version=m.manifest.version,
                description=m.manifest.description,
                processes=m.manifest.processes,
                command=m.manifest.command,
                hooks=m.manifest.hooks,
                rules=[r.rule.name for r in m.rules],
            )
        )
    refused = [ManifestRefusal.model_validate(e.as_dict()) for e in store.errors.values()]
    return AgentList(agents=out, errors=refused)
