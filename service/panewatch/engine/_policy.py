"""The approval policy at work: every blocked request decided (``PolicyDecided``), and an
``allow`` or ``deny`` answered through the guarded answer with the rule as the actor.

Safety is here, not in the rules: a request is trusted only when it is the agent's own (a hook
payload, an ACP permission request) and, on a terminal, the screen's prompt reads the same
subject (and tool) — so a pane that draws a fake dialog gets no answer from the policy. The
same check runs again inside the guard right before the keys are written, and the option is the
one the manifest names for "approve once" or "refuse", never a guess. A hook often lands before
its dialog is drawn: the decision waits (bounded) for the screen to show it.
"""

from __future__ import annotations

import asyncio
import logging
import re

from ..errors import Conflict, InvalidRequest, UnknownSession
from ..manifest import RequestRead
from ..panes.asks import Request, same_subject, screen_request
from ..policy import Asked, PolicyAction, PolicyStore, Ruling
from ..states import RequestSource, State
from ._context import EngineContext
from ._feed import Feed
from ._guard import Guard
from ._sessions import AcpSession, AnySession, TerminalSession
from ._table import Sessions, agent_name
from ._views import prompt_view
from .events import Deleted, Event, PolicyDecided, StateChanged
from .models import Actor, ActorKind, Prompt

log = logging.getLogger("panewatch.policy")

#: How long a request waits for its hook and its dialog to agree before a person is asked.
DRAWN_S = 3.0
#: ACP tool kinds in the policy's tool names (the protocol's kinds are fixed).
ACP_TOOLS = {"execute": "Bash", "edit": "Edit", "read": "Read", "fetch": "WebFetch"}
#: ACP option kinds that approve once and refuse.
ACP_KINDS = {PolicyAction.allow: "allow_once", PolicyAction.deny: "reject_once"}


def _screen_agrees(session: TerminalSession, ctx: EngineContext, request: Request) -> str | None:
    """Why the screen does not show ``request`` (None: its prompt reads the same subject and tool)."""
    pane = session.pane
    if request.source != RequestSource.hook:
        return f"the request is read off the screen alone ({request.source})"
    if request.disagrees:
        return request.disagrees
    manifest = pane.manifest(ctx.store)
    rule = pane.verdict.rule if pane.verdict.state == State.blocked else None
    screen = pane.screen
    seen = screen_request(manifest, rule, screen.lines(), screen.title, screen.cursor.row)
    if seen is None or seen.subject is None or request.subject is None:
        return "the screen's prompt does not show the request's subject"
    if not same_subject(seen.subject, request.subject):
        return f"the screen reads another subject ({seen.subject!r})"
    tools = manifest.manifest.tools if manifest else {}
    if seen.tool and request.tool and tools.get(seen.tool, seen.tool) != tools.get(request.tool, request.tool):
        return f"the screen shows another tool ({seen.tool})"
    return None


class PolicyRunner:
    """Decides each blocked stretch once; answers only trusted requests, only through the guard."""

    def __init__(self, ctx: EngineContext, table: Sessions, feed: Feed, guard: Guard, store: PolicyStore) -> None:
        self.ctx, self.table, self.feed, self.guard, self.store = ctx, table, feed, guard, store
        self._seen: dict[str, float] = {}  # session -> the blocked stretch (``since``) decided
        self._tasks: set[asyncio.Task[None]] = set()

    def on_event(self, event: Event) -> None:
        """A hub listener: a session that turned blocked gets its request decided."""
        if isinstance(event, Deleted):
            self._seen.pop(event.session, None)
        if not isinstance(event, StateChanged) or self.store.path is None:
            return
        if event.state != State.blocked:
            self._seen.pop(event.session, None)
            return
        if self._seen.get(event.session) == event.at:
            return
        self._seen[event.session] = event.at
        task = asyncio.get_running_loop().create_task(self._guarded(event.session, event.at))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def reload(self, every: float) -> None:
        """Re-read a changed policy file off the event loop (a refusal is logged by the store)."""
        while True:
            await asyncio.sleep(every)
            await asyncio.to_thread(self.store.reload_if_changed)

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- one decision ------------------------------------------------------------------------------
    def _untrusted(self, session: AnySession) -> str | None:
        """Why the session's request is not the agent's own, confirmed (None: it is)."""
        if isinstance(session, AcpSession):
            return None if session.request() is not None else "no pending permission request"
        request = session.pane.request
        if request is None:
            return "nothing is asked"
        return _screen_agrees(session, self.ctx, request)

    async def _drawn(self, session: AnySession, since: float) -> str | None:
        """Why the request is not trusted (None: it is), once trusted or after ``DRAWN_S``: a
        hook's dialog may not be drawn yet, a drawn dialog's hook may not have come yet."""
        clock = self.ctx.clock
        until = clock.time() + DRAWN_S
        while True:
            decision = self.feed.classify_if_moved(session)
            if decision.state != State.blocked or decision.since != since:
                return "the prompt went away"
            why = self._untrusted(session)
            if why is None or clock.time() >= until:
                return why
            await clock.sleep(0.05)

    def _asked(self, session: AnySession, trusted: bool) -> Asked:
        view = session.request()
        tool = view.tool if view else None
        if isinstance(session, AcpSession):
            tool = ACP_TOOLS.get(tool or "", tool)
        else:
            manifest = session.pane.manifest(self.ctx.store)
            if manifest is not None and tool is not None:
                tool = manifest.manifest.tools.get(tool, tool)
        return Asked(
            agent=agent_name(session),
            tool=tool,
            subject=view.subject if view else None,
            subject_kind=view.subject_kind if view else None,
            folder=session.cwd,
            trusted=trusted,
        )

    async def _guarded(self, sid: str, since: float) -> None:
        """One decision; a failure is logged, never left to the loop (nothing is answered then)."""
        try:
            await self._consider(sid, since)
        except Exception:
            log.exception("the policy could not decide", extra={"session": sid})

    async def _consider(self, sid: str, since: float) -> None:
        session = self.table.get(sid)
        if session is None:
            return
        why = await self._drawn(session, since)
        if session.decision.state != State.blocked or session.decision.since != since:
            return
        ruling = self.store.decide(self._asked(session, why is None))
        if why is not None and ruling.rule is not None and ruling.action == PolicyAction.ask:
            ruling = ruling.held(f"{ruling.reason}: {why}")
        if ruling.acts and self.store.paused:
            ruling = ruling.held(f"the policy is paused (it would {ruling.action}: {ruling.reason})")
        option, pid = self._option(session, ruling) if ruling.acts else (None, None)
        if ruling.acts and option is None:
            ruling = ruling.held(f"the prompt has no option to {ruling.action} once: a person decides")
        self.store.record(ruling)
        would = str(ruling.would) if ruling.would else None
        self.ctx.hub.publish(
            PolicyDecided(
                sid, ruling.rule, str(ruling.action), ruling.reason, session.request(), self.ctx.wall(), would
            )
        )
        log.info("policy %s by %s: %s", ruling.action, ruling.rule, ruling.reason, extra={"session": sid})
        if option is not None:
            await self._answer(session, ruling, option, pid, trusted=why is None)

    def _option(self, session: AnySession, ruling: Ruling) -> tuple[int | str | None, str | None]:
        """The option that approves once (allow) or refuses (deny), as the manifest names it,
        and the prompt's id (the answer lands on this prompt only)."""
        screen = session.pane.screen.lines() if isinstance(session, TerminalSession) else session.lines()
        prompt: Prompt | None = prompt_view(session, self.ctx.store, screen)
        if prompt is None:
            return None, None
        found: int | str | None = None
        if isinstance(session, AcpSession):
            kind = ACP_KINDS[ruling.action]
            found = next((o.option_id for o in prompt.options if o.kind == kind and o.option_id), None)
        elif (pattern := self._label_pattern(session, ruling.action)) is not None:
            found = next((o.option for o in prompt.options if o.option is not None and pattern.search(o.label)), None)
        return found, prompt.id

    def _tells_why(self, session: TerminalSession) -> bool:
        """Whether the blocked rule's manifest says its agent waits for words after a refusal."""
        found = self._request_rule(session)
        return found is not None and found.tell_why

    def _request_rule(self, session: TerminalSession) -> RequestRead | None:
        pane = session.pane
        manifest = pane.manifest(self.ctx.store)
        rule = pane.verdict.rule
        found = next((c.rule for c in manifest.rules if c.rule.name == rule), None) if manifest else None
        return found.request if found is not None else None

    def _label_pattern(self, session: TerminalSession, action: PolicyAction) -> re.Pattern[str] | None:
        found = self._request_rule(session)
        if found is None:
            return None
        text = found.approve_once if action == PolicyAction.allow else found.refuse
        return re.compile(text) if text else None

    async def _answer(
        self, session: AnySession, ruling: Ruling, option: int | str, prompt_id: str | None, *, trusted: bool
    ) -> None:
        """The guarded answer, the rule as the actor; right before writing, the request is checked
        to be the one decided on (and still trusted, unless a screen-only rule decided)."""
        actor = Actor(kind=ActorKind.policy, id=ruling.rule or "policy", name=ruling.reason[:200])
        expected = session.request()
        tell_why = isinstance(session, TerminalSession) and self._tells_why(session)

        def still() -> str | None:  # run by the guard right before it writes
            if session.request() != expected:
                return "the request changed before the policy's answer"
            return self._untrusted(session) if trusted else None

        try:
            result = await self.guard.answer(
                session, actor, option=option, keys=None, prompt_id=prompt_id, verify=still
            )
        except (Conflict, InvalidRequest, UnknownSession) as exc:
            log.warning("the policy's %s was not written: %s", ruling.action, exc, extra={"session": session.id})
            return
        if not result.took:
            log.warning("the policy's %s did not take", ruling.action, extra={"session": session.id})
        elif ruling.action == PolicyAction.deny and isinstance(session, TerminalSession) and tell_why:
            await self._tell_why(session, actor, ruling)

    async def _tell_why(self, session: TerminalSession, actor: Actor, ruling: Ruling) -> None:
        """After a refusal the agent waits for the user's words: the rule's reason is typed there,
        through the guarded send, once the agent is back at its input (bounded: ``DRAWN_S``)."""
        clock = self.ctx.clock
        until = clock.time() + DRAWN_S
        while self.feed.classify_if_moved(session).state != State.idle:
            if clock.time() >= until:
                log.warning(
                    "the policy's reason was not typed: the agent did not wait for words", extra={"session": session.id}
                )
                return
            await clock.sleep(0.05)
        try:
            await self.guard.send(session, f"Refused by policy rule {ruling.rule}: {ruling.reason}", actor)
        except (Conflict, InvalidRequest, UnknownSession) as exc:
            log.warning("the policy's reason was not typed: %s", exc, extra={"session": session.id})
