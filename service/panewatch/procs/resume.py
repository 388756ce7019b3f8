"""Resuming a lost agent: the command it was launched with, its conversation id put in.

A pane is lost when its tmux server died (killed, machine rebooted). The agent's conversation is
not: Claude Code, Codex, Gemini CLI, Qwen Code, opencode, Copilot CLI, Cline and gptme keep it on disk
under an id their hooks report (:func:`agent_session_id`). Resuming
starts the *launched* command again — the wrappers in front (``sudo -u agent --``, ``env A=1``),
the agent's own flags (``--permission-mode plan``, ``--sandbox read-only``) — with the manifest's
resume arguments put in their place, in the same folder under the same Panewatch session id. A
resume that silently dropped a flag would bring a restricted agent back unrestricted, so whatever
cannot be kept exactly is a :class:`ResumeError` (an API 409 with the reason) instead.

How an agent's words read (which options take the next word) is the manifest's data
(:class:`ResumeSpec`): the launch's first prompt is left out (the conversation has it already, and
sending it again would redo the task), every option is kept except those that pick a conversation
themselves (``--resume X``, ``--continue``), which the resume arguments replace.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from .wrappers import split_launch

__all__ = ["AGENT_SESSION_ID", "ResumeError", "ResumeSpec", "agent_session_id", "resume_argv"]

#: What an agent's own conversation id may look like: it becomes one argv element, never an option.
AGENT_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
ID = "{agent_session_id}"


class ResumeError(Exception):
    """This session cannot be resumed; the message says why (an API 409 with a reason)."""


class ResumeSpec(BaseModel):
    """A manifest's ``[resume]`` table: the arguments that reopen a conversation, where they go in
    the launched argv, and how the agent's options read (from its ``--help``; a test compares)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: what reopens the conversation, ``{agent_session_id}`` in it
    args: tuple[str, ...]
    #: "end": after the launch's own words (``claude … --resume ID``); "after_program": right after
    #: the program (a subcommand: ``codex resume ID …``, whose options follow it)
    at: Literal["end", "after_program"] = "end"
    #: options of a launch that pick a conversation themselves (``--continue``), or carry the
    #: first prompt (Gemini's ``-i``): left out with their values, the args take their place
    replaces: tuple[str, ...] = ()
    #: options whose value is the next word, whatever it is
    value_options: tuple[str, ...] = ()
    #: options that take the next word only when it does not start with "-" (``--debug [filter]``)
    optional_value: tuple[str, ...] = ()
    #: options that take every next word up to one starting with "-" (``--add-dir a b``)
    variadic: tuple[str, ...] = ()
    #: options without a value
    flags: tuple[str, ...] = ()
    #: options a launch cannot be resumed with as it was (Cline's ``--worktree`` makes a new
    #: worktree at every start): such a launch is refused with the reason, never resumed without
    refused: tuple[str, ...] = ()
    #: what the launch's bare words (operands) are: "prompt", its first prompt (left out: the
    #: conversation has it), or "kept", the agent's own (opencode's ``[project]`` folder)
    operands: Literal["prompt", "kept"] = "prompt"

    @model_validator(mode="after")
    def _consistent(self) -> ResumeSpec:
        if not any(ID in part for part in self.args):
            raise ValueError("resume.args must contain {agent_session_id} (the conversation to resume)")
        if self.at == "end" and not self.args[0].startswith("-"):
            # after the launch's words, a bare first word could be taken as a variadic's value
            raise ValueError('resume.args placed at "end" must start with an option (e.g. --resume)')
        seen: dict[str, str] = {}
        for kind in ("value_options", "optional_value", "variadic", "flags"):
            for name in getattr(self, kind):
                if not name.startswith("-"):
                    raise ValueError(f"resume.{kind}: {name!r} is not an option")
                if name in seen:
                    raise ValueError(f"resume: {name} is in both {seen[name]} and {kind}")
                seen[name] = kind
        unknown = [name for name in (*self.replaces, *self.refused) if name not in seen]
        if unknown:
            raise ValueError(f"resume: {', '.join(unknown)} must also be listed by how they read")
        return self

    def kind_of(self, option: str) -> str | None:
        """How ``option`` (no ``=value``) reads: one of the four lists' names, or None (unknown)."""
        for kind in ("value_options", "optional_value", "variadic", "flags"):
            if option in getattr(self, kind):
                return kind
        return None


#: Where each agent's hook payload names its conversation, first found wins: ``session_id``
#: (Claude Code, Gemini CLI and Qwen Code, in every event; gptme's plugin: the conversation's name), ``thread-id`` (Codex's notify),
#: ``sessionID`` (opencode's plugin; it sends no event of a subagent's session), ``sessionId``
#: (Copilot CLI, in every hook payload), ``sessionContext.rootSessionId`` (Cline: the session
#: ``cline history`` lists and ``--id`` reopens, the same in a subagent's events; its top-level
#: ``taskId`` names one task of it, which ``--id`` does not take).
CONVERSATION_KEYS: tuple[tuple[str, ...], ...] = (
    ("session_id",),
    ("thread-id",),
    ("thread_id",),
    ("sessionID",),
    ("sessionId",),
    ("sessionContext", "rootSessionId"),
)


def agent_session_id(payload: Mapping[str, Any]) -> str | None:
    """The agent's conversation id in a hook payload (:data:`CONVERSATION_KEYS`), when it looks
    like one: it becomes a word of the resumed command, never an option."""
    for path in CONVERSATION_KEYS:
        value: Any = payload
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if isinstance(value, str) and AGENT_SESSION_ID.fullmatch(value):
            return value
    return None


def _option_name(word: str, spec: ResumeSpec) -> tuple[str, bool]:
    """(the option a word names, whether it carries its own value): ``--model=x`` and ``-mx``
    (a short value option with its value attached) are one word."""
    if word.startswith("--"):
        name, eq, _ = word.partition("=")
        return name, bool(eq)
    if len(word) > 2 and spec.kind_of(word) is None and spec.kind_of(word[:2]) in ("value_options", "optional_value"):
        return word[:2], True
    return word, False


def _agent_words(words: Sequence[str], spec: ResumeSpec) -> list[str]:
    """The launch's words after the program, without its prompt and without the options the
    resume replaces; ResumeError where a word cannot be read for sure."""
    kept: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            if spec.operands == "kept":
                kept += words[i:]
            break  # only operands follow: the prompt, unless the agent's operands are kept
        if not word.startswith("-") or word == "-":
            # an operand: the first prompt (or a subcommand such as `codex resume OLD`), or
            # where the manifest says so, the agent's own (a folder)
            if spec.operands == "kept":
                kept.append(word)
            i += 1
            continue
        name, attached = _option_name(word, spec)
        if name in spec.refused:
            raise ResumeError(
                f"the launch's {name} sets up something new at every start, so the agent cannot be started "
                "again as it was launched; start a new session"
            )
        kind = spec.kind_of(name)
        taken = [word]
        i += 1
        if kind is None and not attached and i < len(words) and not words[i].startswith("-"):
            raise ResumeError(
                f"the manifest does not know the option {name}, so it cannot tell whether {words[i]!r} is "
                "its value or the first prompt; add the option to the manifest's [resume] table"
            )
        if not attached:
            if kind == "value_options":
                if i >= len(words):
                    raise ResumeError(f"the launch ends with {name}, which needs a value")
                taken.append(words[i])
                i += 1
            elif kind == "optional_value" and i < len(words) and not words[i].startswith("-"):
                taken.append(words[i])
                i += 1
            elif kind == "variadic":
                while i < len(words) and not words[i].startswith("-"):
                    taken.append(words[i])
                    i += 1
        if name not in spec.replaces:
            kept += taken
    return kept


def resume_argv(
    launched: Sequence[str] | None,
    resume: ResumeSpec | Sequence[str],
    *,
    agent: str | None,
    processes: Sequence[str],
    conversation: str | None,
    command: Sequence[str] = (),
) -> list[str]:
    """The command that resumes ``conversation``: ``launched`` (the argv before hooks were added)
    with the manifest's ``resume`` in place. ``resume`` as a plain list is the older whole-command
    form: it keeps the wrappers only, so it resumes a launch that was the bare program or the
    manifest's own ``command`` and nothing else."""
    name = agent or "unknown"
    if not resume:
        raise ResumeError(f"the {name} agent has no resume command in its manifest")
    if not conversation:
        raise ResumeError(
            "the agent never reported its conversation id (its hooks did not run), so there is "
            "nothing to resume; start a new session"
        )
    if not AGENT_SESSION_ID.fullmatch(conversation):
        raise ResumeError("the recorded conversation id is not one an agent would give")
    if launched is None:
        raise ResumeError(
            "this session was recorded by an older Panewatch, which did not keep how it was launched: "
            "resuming it could drop its flags or wrapper; start a new session"
        )
    launch = split_launch(launched)
    if not launch.agent:
        raise ResumeError(
            f"cannot find the agent's own command in {' '.join(launched)[:80]!r} (a wrapper whose command "
            "is one shell string), so its resume arguments have nowhere to go"
        )
    programs = tuple(processes) or ((os.path.basename(resume[0]),) if isinstance(resume, Sequence) else ())
    if launch.program not in programs:
        raise ResumeError(
            f"the session runs {launch.program!r}, not the {name} agent ({', '.join(programs)}): "
            "Panewatch knows where the resume arguments go only in that agent's own command line "
            "(a command run through a shell, `bash -c …`, cannot be resumed keeping its launch)"
        )
    program, words = launch.agent[0], launch.agent[1:]
    if not isinstance(resume, ResumeSpec):
        if words and list(words) != list(command[1:]):
            raise ResumeError(
                f"the {name} manifest's resume is a whole command (the older list form), which would drop the "
                f"launch's own arguments ({' '.join(words)[:80]}); give the manifest a [resume] table"
            )
        return launch.with_agent([program, *(part.replace(ID, conversation) for part in resume[1:])])
    kept = _agent_words(words, resume)
    args = [part.replace(ID, conversation) for part in resume.args]
    agent_argv = [program, *kept, *args] if resume.at == "end" else [program, *args, *kept]
    return launch.with_agent(agent_argv)
