"""Input that the OS, JSON or a log line cannot carry is refused at the door with a short reason.

Three kinds of input broke the service before it was checked here: a lone surrogate or a NUL in an
argument (the process was spawned, then every JSON answer that named it failed), text in a hook
report (it entered the state and broke the session list), and JSON nested deeper than the parser's
recursion limit (a 500). Request models use the annotated types below; free-form text that the
service keeps (hook reports) is cleaned instead of refused, because an agent's hook cannot retry.
The API's refusals quote input only through ``short_errors``/``clean_text`` (``api/errors.py``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Annotated, Any

from fastapi.exceptions import RequestValidationError
from pydantic import AfterValidator, StringConstraints

#: Deepest JSON any endpoint takes (a hook payload is 3 levels deep; 64 leaves room).
MAX_JSON_DEPTH = 64
#: Longest piece of the client's input repeated back in an error.
ECHO_MAX = 120
#: Longest text of one field kept from a hook report.
REPORT_TEXT_MAX = 500
#: A hook payload's objects that say what a permission request is about: Claude's and Codex's
#: ``tool_input``, Gemini's ToolPermission ``details`` (the confirmation's command or file); and
#: Cline's ``sessionContext``, whose ``rootSessionId`` is the conversation a resume reopens.
NESTED_KEPT = frozenset({"tool_input", "details", "sessionContext"})
#: A text in a hook payload's ``tool_input`` (a command, a path): longer than a report's texts.
TOOL_INPUT_TEXT_MAX = 2000

_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f]")


class BadJson(ValueError):
    """A body that is not JSON, or not JSON this service takes (too deep)."""


# --- refusing: the request models' field types ------------------------------------------------------


def _utf8(value: str) -> str:
    if _SURROGATE.search(value):
        raise ValueError("contains a lone surrogate (\\ud800-\\udfff): not encodable as UTF-8")
    return value


def _os_string(value: str) -> str:
    _utf8(value)
    if "\x00" in value:
        raise ValueError("contains a NUL character, which the OS cannot pass")
    return value


def _env_key(value: str) -> str:
    _os_string(value)
    if not value or "=" in value:
        raise ValueError("an environment variable's name must be non-empty and have no '='")
    return value


#: Any text that must survive a UTF-8 JSON answer (names, keys typed into a pane).
Utf8Text = Annotated[str, AfterValidator(_utf8)]
#: An argument, an environment value, a folder: UTF-8 without NUL.
OsString = Annotated[str, StringConstraints(max_length=131_072), AfterValidator(_os_string)]
#: A folder path (PATH_MAX).
OsPath = Annotated[str, StringConstraints(max_length=4096), AfterValidator(_os_string)]
#: An environment variable's name.
EnvKey = Annotated[str, StringConstraints(max_length=1024), AfterValidator(_env_key)]
#: A manifest's name as a client may give it.
AgentName = Annotated[str, StringConstraints(max_length=100), AfterValidator(_os_string)]


# --- cleaning: text the service keeps --------------------------------------------------------------


#: The longest session name (the create body's limit too).
NAME_MAX = 80


def clean_text(value: str, limit: int = REPORT_TEXT_MAX) -> str:
    """Printable UTF-8 of at most ``limit`` characters: surrogates become U+FFFD, controls go."""
    value = value[: limit * 2]
    value = _SURROGATE.sub("\ufffd", value)
    value = _CONTROL.sub("", value)
    return value[:limit]


def clean_report(payload: Mapping[Any, Any]) -> dict[str, Any]:
    """A hook payload reduced to what a state can carry: top-level scalars, text cleaned and cut.

    Nested values are dropped — they are where a hostile or broken hook would hide megabytes or
    unencodable text — except those that say what a permission request is about, or which
    conversation it is (``NESTED_KEPT``):
    each keeps its own top-level scalars and lists of strings (an argv), cut the same way.
    """
    out: dict[str, Any] = {}
    for key, value in list(payload.items())[:64]:
        if not isinstance(key, str):
            continue
        key = clean_text(key, 64)
        if isinstance(value, str):
            out[key] = clean_text(value)
        elif isinstance(value, bool) or value is None or isinstance(value, (int, float)):
            out[key] = value
        elif key in NESTED_KEPT and isinstance(value, Mapping):
            out[key] = _flat(value)
    return out


def _flat(value: Mapping[Any, Any]) -> dict[str, Any]:
    """A tool's input without anything nested: scalars, and lists of at most 64 strings."""
    out: dict[str, Any] = {}
    for key, item in list(value.items())[:32]:
        if not isinstance(key, str):
            continue
        key = clean_text(key, 64)
        if isinstance(item, str):
            out[key] = clean_text(item, TOOL_INPUT_TEXT_MAX)
        elif isinstance(item, bool) or item is None or isinstance(item, (int, float)):
            out[key] = item
        elif isinstance(item, list) and len(item) <= 64 and all(isinstance(x, str) for x in item):
            out[key] = [clean_text(x, TOOL_INPUT_TEXT_MAX) for x in item]
    return out


# --- JSON ------------------------------------------------------------------------------------------


def too_deep(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when containers nest deeper than ``limit`` (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children: Iterable[Any]
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def json_too_deep(body: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether a JSON body nests deeper than ``limit``. Counting brackets (C speed) settles most
    bodies; the rest are parsed once. Not JSON at all is not "too deep": the endpoint says why."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    try:
        return too_deep(json.loads(body), limit)
    except RecursionError:
        return True
    except ValueError:
        return False


def parse_json(body: bytes, limit: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` that refuses depth beyond ``limit`` and says what is wrong in a line."""
    try:
        value = json.loads(body)
    except RecursionError:
        raise BadJson(f"JSON nested deeper than {limit} levels") from None
    except (ValueError, UnicodeDecodeError):
        raise BadJson("the body is not JSON") from None
    if too_deep(value, limit):
        raise BadJson(f"JSON nested deeper than {limit} levels")
    return value


# --- errors that never echo much ------------------------------------------------------------------


def _short(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value, ECHO_MAX) + ("…" if len(value) > ECHO_MAX else "")
    if isinstance(value, bool) or value is None or isinstance(value, (int, float)):
        return value
    return f"<{type(value).__name__}>"


def short_errors(exc: RequestValidationError) -> list[dict[str, Any]]:
    """Pydantic's errors with the client's input cut to ``ECHO_MAX`` characters and cleaned."""
    out = []
    for err in exc.errors()[:20]:
        item: dict[str, Any] = {
            "loc": [_short(part) for part in err.get("loc", ())],
            "msg": clean_text(str(err.get("msg", "")), 300),
            "type": err.get("type"),
        }
        if "input" in err:
            item["input"] = _short(err["input"])
        out.append(item)
    return out
