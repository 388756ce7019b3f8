"""The evaluation's Markdown: the seed's table, the seed's figures beside ours, the process table.

Numbers are formatted the way the seed prints them (``0.26 s``, ``0 / 25``, ``31 / 78 s``) so
the two tables can be read side by side.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from .eval_analysis import Analysis, DetectorRow
from .eval_proc import StateRow

#: The seed's run (fake agent on macOS, seed 7, 30 tasks, 25 prompts): latency median, max,
#: missed, persistence, false alarms working, idle — as printed in its table.
SEED_ROWS: dict[str, tuple[str, str, str, str, str, str]] = {
    "screen_50ms": ("0.03 s", "0.06 s", "0 / 25", "0 s", "0", "0"),
    "screen_sweep": ("0.26 s", "0.70 s", "0 / 25", "0.4 s", "0", "0"),
    "tail": ("0.03 s", "0.06 s", "0 / 25", "77.0 s", "0", "0"),
    "question": ("0.03 s", "0.06 s", "0 / 25", "58.0 s", "0 / 231 s", "4 / 143 s"),
    "quiet_0.5": ("0.52 s", "0.56 s", "0 / 25", "0 s", "31 / 78 s", "30 / 168 s"),
    "quiet_1": ("1.02 s", "1.06 s", "0 / 25", "0 s", "28 / 63 s", "30 / 153 s"),
    "quiet_2": ("2.03 s", "2.06 s", "0 / 25", "0 s", "21 / 38 s", "30 / 123 s"),
    "quiet_3": ("3.02 s", "3.06 s", "0 / 25", "0 s", "17 / 19 s", "30 / 93 s"),
    "quiet_5": ("5.02 s", "5.05 s", "9 / 25", "0 s", "3 / 1 s", "18 / 46 s"),
    "quiet_8": ("–", "–", "25 / 25", "0 s", "0", "6 / 7 s"),
}

HEADER = ("Detector", "Median latency", "Max", "Missed", "Persistence", "False, agent working", "False, agent idle")


def seconds(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f} s"


def alarms(row: DetectorRow, state: str) -> str:
    n, total = row.score.false_alarms(state)
    return "0" if n == 0 else f"{n} / {total:.1f} s"


def cells(row: DetectorRow) -> list[str]:
    s = row.score
    return [
        seconds(s.median_latency),
        seconds(s.max_latency),
        f"{s.missed} / {len(s.prompts)}",
        seconds(s.mean_persistence, 1),
        alarms(row, "working"),
        alarms(row, "idle"),
    ]


def table(head: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines)


def detector_table(a: Analysis) -> str:
    body = []
    for row in a.rows:
        label = f"**{row.info.label}**" if row.info.key == "service" else row.info.label
        body.append([label, *cells(row)])
    return table(HEADER, body)


def seed_table(a: Analysis) -> str:
    """Our figures under the seed's, row by row (the service has no seed row: it is new)."""
    body = []
    for row in a.rows:
        seed = SEED_ROWS.get(row.info.key)
        body.append([row.info.label, "this run", *cells(row)])
        if seed is not None:
            body.append(["", "seed", *seed])
    return table(("Detector", "", *HEADER[1:]), body)


def _shares(counter: Counter[str], total: int, limit: int = 4) -> str:
    parts = [f"{name} {100 * n / total:.1f}%" for name, n in counter.most_common(limit)]
    rest = total - sum(n for _, n in counter.most_common(limit))
    if rest:
        parts.append(f"other {100 * rest / total:.1f}%")
    return ", ".join(parts)


def proc_table(rows: Sequence[StateRow]) -> str:
    body = []
    for r in rows:
        cpu = "–" if r.cpu_percent is None else f"{r.cpu_percent:.2f}%"
        body.append(
            [
                r.state,
                str(r.samples),
                _shares(r.letters, r.samples),
                _shares(r.wchans, r.samples),
                _shares(r.syscalls, r.samples),
                cpu,
            ]
        )
    return table(("True state", "Samples", "State letter", "wchan", "syscall", "CPU, of a core"), body)


def detail_table(a: Analysis) -> str:
    """Per detector: every latency and the longest persistence, for looking behind the medians."""
    body = []
    for row in a.rows:
        s = row.score
        lat = ", ".join("miss" if p.latency is None else f"{p.latency:.2f}" for p in s.prompts)
        body.append([row.info.label, lat or "–", seconds(s.max_persistence, 1), str(len(s.early))])
    return table(("Detector", "Latency of each prompt, s", "Longest persistence", "Forgiven early slivers"), body)


def service_sources(a: Analysis) -> str:
    """Which signal made each of the service's blocked verdicts (screen rule, hook, ...)."""
    sid = a.meta.get("session")
    seen: Counter[str] = Counter()
    for r in a.records:
        if r["k"] == "service" and r["v"] == "blocked" and (sid is None or r["session"] == sid):
            seen[f"{r.get('source')}: {r.get('rule')}"] += 1
    return ", ".join(f"{k} ×{n}" for k, n in seen.most_common()) or "none"


# -- the whole document ------------------------------------------------------------------------

NOTES_BEGIN, NOTES_END = "<!-- notes:begin -->", "<!-- notes:end -->"
#: A hook may arrive this long before the true change it reports and still be matched to it.
HOOK_LEAD_S = 0.5

TRUTH_FAKE = (
    "the fake agent's own side file: it appends its state right after writing the screen that shows "
    "it (`blocked` once a permission dialog is drawn, `working` once the answer erased it, `idle` at "
    "the end of a turn)."
)
TRUTH_CLAUDE = (
    "pieced together from what the detectors never read: `working` from the moment the bot's "
    "Enter was written; **prompt drawn** = the first moment the dialog's question *and* its footer "
    "(e.g. `Do you want to proceed?` + `Esc to cancel · Tab to amend`) are on an independent "
    "emulated screen ({backend}) fed the same bytes, counted only between a mock-API reply that "
    "ended in `tool_use` and the next model request; `blocked` lasts until they leave that screen; "
    "`idle` from the moment a reply ending the turn (`end_turn`) finished streaming (mock log)."
)

DEFINITIONS = """\
* **Latency**: from the prompt drawn (truth) to the first moment the detector says "needs you"
  (`blocked`, or its flag) inside the prompt. Rule detectors are read on 50 ms ticks; the
  service is timed when its `/ws/state` event arrived.
* **Missed**: prompts during which the detector never said "needs you".
* **Persistence**: mean time the detector went on saying "needs you" without a break after the
  prompt's end (the answer took), over the prompts it caught.
* **False alarms**: the rest of the time it said "needs you" while the truth was `working` /
  `idle`: episodes (one per truth segment touched) / total seconds. Persistence is not counted
  again here; neither is a sliver of ≤ 0.1 s right before a prompt that runs on into it (the
  prompt's bytes reach the reader a moment before the agent's truth record is written) —
  the per-prompt table counts those."""


def _duration(a: Analysis) -> str:
    return f"{(a.end - a.start) / 60:.1f} min"


def bot_summary(a: Analysis) -> list[str]:
    """What the bot's guarded writes met: accepted, refused, took."""
    bot = [r for r in a.records if r["k"] == "bot"]
    sends = [r for r in bot if r.get("action") == "send"]
    answers = [r for r in bot if r.get("action") == "answer"]
    lines = []
    refused_sends = [r for r in sends if r.get("status") == 409]
    lines.append(
        f"* Tasks typed: {len(sends)}, via `{a.meta.get('answer_via', 'service')}`"
        + (
            f" (`POST /send` refused {len(refused_sends)}: "
            + "; ".join(str((r.get("refusal") or {}).get("detail")) for r in refused_sends)
            + ")"
            if refused_sends
            else " (`POST /send` refused none)"
            if a.meta.get("answer_via") == "service"
            else ""
        )
    )
    took = [r for r in answers if r.get("took")]
    refused = [r for r in answers if r.get("status") == 409]
    waited = sorted(r["waited_s"] for r in answers if r.get("waited_s") is not None)
    text = f"* Answers: {len(answers)}"
    if a.meta.get("answer_via", "service") == "service":
        text += (
            f" through `POST /answer`; the service confirmed {len(took)} took (prompt gone on its fresh "
            f"re-read{f', after {waited[len(waited) // 2]:.2f} s median' if waited else ''}); "
            f"refused {len(refused)}"
        )
        if refused:
            text += ": " + "; ".join(str((r.get("refusal") or {}).get("detail")) for r in refused)
    lines.append(text + ".")
    retries = [r for r in bot if r.get("action") == "retry"]
    verified = [r for r in bot if r.get("action") == "verified"]
    if verified:
        gone = [r for r in verified if r.get("gone")]
        lines.append(
            f"* Independent check: {len(gone)} / {len(verified)} dialogs left the independent screen "
            f"within 5 s of the answer; {tool_results(a)}."
        )
    if retries:
        lines.append(f"* Answers typed again straight into the PTY because the prompt stayed: {len(retries)}.")
    timeouts = [r for r in bot if r.get("action") == "timeout"]
    if timeouts:
        lines.append(
            f"* **Turns that never ended** (run cut short): {', '.join(r.get('task', '?') for r in timeouts)}."
        )
    return lines


def tool_results(a: Analysis) -> str:
    """For each answered dialog: did the next model request carry the tool's (non-error) result?"""
    mock = [r for r in a.records if r["k"] == "mock" and r.get("event") == "request"]
    ok = total = 0
    for r in a.records:
        if r["k"] != "bot" or r.get("action") != "verified":
            continue
        total += 1
        tool = str(r.get("dialog", "")).removeprefix("dialog:")
        nxt = next((m for m in mock if m["t"] > r.get("shown", r["t"]) and m.get("path") == "/v1/messages"), None)
        conv = (nxt or {}).get("conversation") or {}
        ok += conv.get("after") == tool and not conv.get("error")
    return f"{ok} / {total} next model requests carried the tool's result (allowed, not an error)"


def hook_summary(a: Analysis) -> list[str]:
    """Hook events the CLI posted, and how far each fell from the truth change it reports."""
    hooks = [r for r in a.records if r["k"] == "hook"]
    if not hooks:
        return []
    lines = []
    counts = Counter(r["event"] + (f":{r['notification']}" if r.get("notification") else "") for r in hooks)
    lines.append("* Received: " + ", ".join(f"`{k}` ×{n}" for k, n in counts.most_common()) + ".")
    starts: dict[str, list[float]] = {}
    for seg in a.truth:
        starts.setdefault(seg.state, []).append(seg.start)
    by_event: dict[str, list[float]] = {}
    for r in hooks:
        # the change a hook reports: the latest one into its state, or one a moment after it
        # (PermissionRequest fires just before the dialog is drawn)
        before = [s for s in starts.get(r.get("state") or "", []) if s <= r["t"] + HOOK_LEAD_S]
        if not before:
            continue
        nearest = before[-1]
        key = f"{r['event']}" + (f":{r['notification']}" if r.get("notification") else "") + f" → {r['state']}"
        by_event.setdefault(key, []).append(r["t"] - nearest)
    for key, offsets in sorted(by_event.items()):
        offsets.sort()
        lines.append(
            f"* `{key}`: {offsets[len(offsets) // 2]:+.2f} s after the true change to that state "
            f"(median of {len(offsets)}, range {offsets[0]:+.2f} … {offsets[-1]:+.2f} s)"
        )
    return lines


def kept_notes(previous: str) -> str:
    if NOTES_BEGIN in previous and NOTES_END in previous:
        return previous[previous.index(NOTES_BEGIN) : previous.index(NOTES_END) + len(NOTES_END)]
    return f"{NOTES_BEGIN}\n_(no notes yet)_\n{NOTES_END}"


def render(a: Analysis, picture: str | None, log: str | None, previous: str = "") -> str:
    m = a.meta
    agent = m.get("agent", "?")
    if agent == "claude":
        title = f"Claude Code {m.get('cli_version', '?')} (real CLI, mock model API)"
        truth = TRUTH_CLAUDE.format(backend=m.get("watch_backend", "?"))
    else:
        title = f"fake agent, seed {m.get('seed')}"
        truth = TRUTH_FAKE
    n = len(a.prompts)
    parts = [
        f"# Evaluation: {title}",
        "",
        "Produced by (from the repository root, `.venv/bin/` on the PATH):",
        "",
        f"```sh\n{m.get('command', '?')}\n```",
        "",
        f"{m.get('started', '?')} · {_duration(a)} · {m.get('tasks', '?')} tasks · {m.get('platform', '?')} · "
        f"Python {m.get('python', '?')} · Panewatch {m.get('panewatch', '?')} · manifest `{agent}` "
        f"{m.get('manifest_version', '?')} · screen backend {m.get('backend', '?')} · "
        f"{m.get('rows')}×{m.get('cols')}" + (f" · git {m['git']}" if m.get("git") else ""),
        "",
        f"**Truth**: {n} prompts, {a.seconds('blocked'):.0f} s waiting for an answer, "
        f"{a.seconds('working'):.0f} s working, {a.seconds('idle'):.0f} s idle. Truth is {truth}",
        "",
        "## The seed's table",
        "",
        detector_table(a),
        "",
        f"**Panewatch service** is what a client of `WS /ws/state` saw: the running service's own state for "
        f"this session (runtime sweep every {m.get('sweep_ms', 700)} ms + hook reports + foreground process, "
        f"combined by `signals.combine`; plus the fresh re-reads its guarded writes make), timed when each event "
        f"arrived. Its `blocked` verdicts came from: {service_sources(a)}. The other rows are the seed's "
        "detectors, computed by the evaluation on a copy of the same bytes (tapped from the session).",
        "",
        "## Next to the seed's figures",
        "",
        "The seed ran its own fake agent on macOS (30 tasks, 25 prompts, 10.6 min); counts differ with the agent "
        "and its plan, the shape of each row is what compares.",
        "",
        seed_table(a),
        "",
    ]
    if picture:
        parts += [
            "## Timeline",
            "",
            f"![truth against each detector]({picture})",
            "",
            "Red: blocked / needs you; blue: working; grey: idle"
            + ("; green ticks: hook reports" if any(r["k"] == "hook" for r in a.records) else "")
            + ".",
            "",
        ]
    parts += ["## The bot's writes", "", *bot_summary(a), ""]
    hooks = hook_summary(a)
    if hooks:
        parts += ["## Hook reports (`--settings` hooks → `POST /report`)", "", *hooks, ""]
    parts += [
        "## Process states",
        "",
        "`/proc/PID/stat` (state letter, CPU), `/proc/PID/wchan`, `/proc/PID/syscall` of the agent's main "
        "thread, twice a second, grouped by the true state at that moment.",
        "",
        proc_table(a.proc),
        "",
        "## Notes",
        "",
        kept_notes(previous),
        "",
        "## Per prompt",
        "",
        detail_table(a),
        "",
        "## Definitions",
        "",
        DEFINITIONS,
        "",
    ]
    if log:
        parts += [
            f"Raw log: [`{log}`]({log}) (JSON lines: `truth`, `det`, `service`, `hook`, `mock`, `watch`, "
            f"`bot`, `proc` records on one monotonic clock). Re-render this page from it with "
            f"`panewatch lab evaluate --analyze benchmarks/evaluation/{log}`.",
            "",
        ]
    return "\n".join(parts)
