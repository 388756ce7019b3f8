"""Capture plans: which screens of the real CLI to capture, how to reach them, how to check them.

A plan is data (``panewatch_lab/captures/*.toml``) so that a new CLI version or a new hard case needs a
new entry, not new code. Each capture says how to drive the CLI (``steps``) and what must be
true at the moment of capture, checked on two independent witnesses — the emulated screen
(``screen`` / ``not_screen`` regexes) and the mock API's log (``mock``) — never with the
classifier whose rules the captures are meant to test.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from panewatch.states import State
from panewatch_lab.bundled import load_toml

PLAN_DIR = Path(__file__).with_name("captures")

#: What the mock's log says about the conversation's last main (non-side) request.
#: ``none``: no request yet; ``waiting``: sent, no token yet (thinking); ``streaming``: tokens
#: flowing; ``tool``: the reply ended asking for a tool and no later request came (the CLI holds
#: a tool call: asking permission or running it); ``done``: the turn ended (``end_turn``);
#: ``cancelled``: the CLI hung up mid-reply (Esc).
Turn = Literal["none", "waiting", "streaming", "tool", "done", "cancelled"]
#: Start-up conditions a capture can ask for (see ``CaptureSpec.start``).
StartUp = Literal["git-repo", "untrusted", "no-auth", "git", "promo", "picker"]


def _check_regexes(patterns: list[str]) -> list[str]:
    for pattern in patterns:
        try:
            re.compile(pattern, re.MULTILINE)
        except re.error as exc:
            raise ValueError(f"bad regex {pattern!r}: {exc}") from None
    return patterns


class Step(BaseModel):
    """One action on the CLI. Exactly one of ``send``, ``wait``, ``key``, ``wait_mock``, ``pause``."""

    model_config = ConfigDict(extra="forbid")

    #: Type these characters (``\r`` is Enter).
    send: str | None = None
    #: Wait until the screen shows this regex.
    wait: str | None = None
    #: Answer a dialog with this key: sent once the dialog has been on screen for ``settle``
    #: seconds (keys within ~150 ms of a dialog's first bytes are dropped), and re-sent while
    #: ``gone`` is still on screen.
    key: str | None = None
    gone: str | None = None
    #: Wait until the mock's log shows this turn state.
    wait_mock: Turn | None = None
    #: Let this much time pass (a tool running for a while, a spinner ticking).
    pause: float | None = Field(default=None, gt=0, le=10)
    #: The longest a wait may take (a bound, not a pause: slow starters under load need a minute).
    timeout: float = Field(default=60.0, gt=0)
    settle: float = Field(default=0.5, ge=0.2)

    @field_validator("wait", "gone")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        return value if value is None else _check_regexes([value])[0]

    @model_validator(mode="after")
    def _one_action(self) -> Step:
        actions = [n for n in ("send", "wait", "key", "wait_mock", "pause") if getattr(self, n) is not None]
        if len(actions) != 1:
            raise ValueError(f"a step does exactly one of send, wait, key, wait_mock, pause (got {actions or 'none'})")
        if self.key is not None and self.gone is None:
            raise ValueError("a key step needs `gone`: the regex that leaves the screen once the key took")
        return self


class MockTruth(BaseModel):
    """What the mock's log must say at the moment of capture."""

    model_config = ConfigDict(extra="forbid")

    turn: Turn
    #: The scenario step that answered the last main request.
    step: str | None = None
    #: At most this many seconds since that request's reply ended (a 5 s tool still running).
    within: float | None = Field(default=None, gt=0)
    #: At least this many seconds since it ended (a 5 s tool that never reported back was stopped).
    older: float | None = Field(default=None, gt=0)


class CaptureSpec(BaseModel):
    """One labelled capture, taken at every requested terminal size."""

    model_config = ConfigDict(extra="forbid")

    kind: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    state: State
    note: str = Field(min_length=1)
    #: ``--permission-mode`` for the launch.
    mode: Literal["default", "auto", "plan", "acceptEdits"] = "default"
    #: Leave the folder-trust / API-key start-up dialogs in place (see ``prepare_home``).
    trusted: bool = True
    key_approved: bool = True
    #: Start-up conditions for the Codex, Gemini and Aider labs, to meet the dialogs a user
    #: meets at first start: ``git-repo`` (the project is a fresh git repository),
    #: ``untrusted`` (its folder is not trusted), ``no-auth`` (no sign-in chosen), ``git``
    #: (Aider may use git). Each lab says which it knows (``AgentLab.start_up``).
    start: list[StartUp] = Field(default_factory=list)
    #: What the screen shows once this launch is ready for the steps (default: the plan's).
    ready: str | None = None
    #: The kind whose session this capture continues: its steps run right after that
    #: capture's cut, in the same launch, and its file holds every byte from the CLI's start
    #: (a slow starter costs one start per chain, not one per screen). Its ``start`` and
    #: ``ready`` are the chain's first capture's.
    after: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9-]*$")
    #: Files to create in the project folder first (``edit-me.txt`` for the Edit task).
    files: dict[str, str] = Field(default_factory=dict)
    steps: list[Step] = Field(default_factory=list)
    #: Regexes (multiline) that must all be on the captured screen.
    screen: list[str] = Field(min_length=1)
    #: Regexes that must not be anywhere on it.
    not_screen: list[str] = Field(default_factory=list)
    mock: MockTruth

    @field_validator("screen", "not_screen")
    @classmethod
    def _regexes(cls, value: list[str]) -> list[str]:
        return _check_regexes(value)

    @property
    def name(self) -> str:
        return f"{self.state}-{self.kind}"


class CapturePlan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent: str
    description: str = ""
    #: The mock API scenario (bundled name or path) the tasks are typed against.
    scenario: str = "basic"
    #: Regex the screen shows once the CLI is ready for input (any permission mode).
    ready: str
    capture: list[CaptureSpec]

    @model_validator(mode="after")
    def _unique(self) -> CapturePlan:
        names = [c.name for c in self.capture]
        twice = {n for n in names if names.count(n) > 1}
        if twice:
            raise ValueError(f"captures named twice: {sorted(twice)}")
        kinds = {c.kind: c for c in self.capture}
        for c in self.capture:
            if c.after is not None and c.after not in kinds:
                raise ValueError(f"{c.name}: after = {c.after!r} is no kind of this plan")
            if c.after is not None and (c.start or c.ready):
                raise ValueError(f"{c.name}: a capture that continues another takes that one's start and ready")
        if len({c.after for c in self.capture if c.after}) != len([c for c in self.capture if c.after]):
            raise ValueError("two captures continue the same one: a chain has one next capture")
        return self

    def chains(self, specs: list[CaptureSpec] | None = None) -> list[list[CaptureSpec]]:
        """The captures grouped by launch: each chain starts with a capture that continues none and
        follows ``after`` links; a chain is kept whole if any of ``specs`` (default all) is in it."""
        wanted = {s.kind for s in (specs if specs is not None else self.capture)}
        following = {c.after: c for c in self.capture if c.after}
        out = []
        for head in (c for c in self.capture if c.after is None):
            chain = [head]
            while chain[-1].kind in following:
                chain.append(following[chain[-1].kind])
            if any(c.kind in wanted for c in chain):
                out.append(chain)
        return out


def load_plan(ref: str | Path | None = None) -> CapturePlan:
    """A plan from a path, or by bare name from ``panewatch_lab/captures/`` (default ``claude``)."""
    return CapturePlan.model_validate(load_toml(ref, PLAN_DIR, "claude"))
