// Pure helpers (no DOM): parsing a command line and environment lines, formatting durations
// and commands. (A prompt's options come from the server, which read them off its
// screen.) Kept free of side effects so the tests can import and call them.

/**
 * An argv from what a user typed: a JSON array of strings, or words split on spaces with
 * '…' / "…" quoting and backslash escapes (no variables, no globbing).
 * Returns null for an empty input; throws Error with a readable message when malformed.
 */
export function parseCommand(text) {
  const s = (text || "").trim();
  if (!s) return null;
  if (s.startsWith("[")) {
    let argv;
    try {
      argv = JSON.parse(s);
    } catch (err) {
      throw new Error(`the command looks like JSON but is not valid: ${err.message}`);
    }
    if (!Array.isArray(argv) || argv.length === 0 || !argv.every((a) => typeof a === "string")) {
      throw new Error("a JSON command must be a non-empty array of strings");
    }
    return argv;
  }
  const argv = [];
  let word = "";
  let inWord = false;
  let quote = null;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (quote) {
      if (c === quote) quote = null;
      else if (c === "\\" && quote === '"' && i + 1 < s.length && '"\\'.includes(s[i + 1])) word += s[++i];
      else word += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      inWord = true;
    } else if (c === "\\" && i + 1 < s.length) {
      word += s[++i];
      inWord = true;
    } else if (/\s/.test(c)) {
      if (inWord) argv.push(word);
      word = "";
      inWord = false;
    } else {
      word += c;
      inWord = true;
    }
  }
  if (quote) throw new Error(`unclosed ${quote} quote in the command`);
  if (inWord) argv.push(word);
  return argv;
}

/** "12s", "3m 05s", "2h 03m", "4d 2h" — how long a session has been in its state. */
export function formatDuration(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, "0")}s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h ${String(m % 60).padStart(2, "0")}m`;
  return `${Math.floor(h / 24)}d ${h % 24}h`;
}

/** A FastAPI error body's `detail` as one line (a string, or pydantic's list of errors). */
export function describeDetail(detail) {
  if (detail == null) return "";
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) {
    return detail
      .map((e) => {
        const where = Array.isArray(e.loc) ? e.loc.filter((p) => p !== "body").join(".") : "";
        return where ? `${where}: ${e.msg}` : String(e.msg ?? JSON.stringify(e));
      })
      .join("; ");
  }
  return JSON.stringify(detail);
}

/** The order of the cards: blocked first (longest waiting first), then the rest by creation. */
export function cardOrder(sessions) {
  const rank = (s) => (s.state === "blocked" ? 0 : 1);
  return [...sessions]
    .sort((a, b) => rank(a) - rank(b)
      || (rank(a) === 0 ? a.since - b.since : 0)
      || a.created - b.created
      || String(a.id).localeCompare(String(b.id)))
    .map((s) => s.id);
}

/** "~/src/app" for a folder under the home folder, when we can tell (from $HOME-like prefixes). */
export function shortPath(path) {
  if (!path) return "";
  const m = /^\/(?:home\/[^/]+|root|Users\/[^/]+)(?=\/|$)/.exec(path);
  return m ? `~${path.slice(m[0].length)}` : path;
}

/**
 * A command for display: long JSON arguments (the hooks passed with --settings) shortened,
 * so the details show what was run without a page of JSON.
 */
export function shortCommand(argv) {
  if (!Array.isArray(argv)) return "";
  return argv.map((a) => {
    const s = String(a);
    if (/^\s*[{[]/.test(s) && s.length > 40) return "{…}";
    return /[\s"'\\]/.test(s) || s === "" ? JSON.stringify(s) : s;
  }).join(" ");
}

/**
 * Environment variables from "NAME=value" lines (blank lines and # comments skipped).
 * Returns {NAME: value}; throws Error naming the first malformed line.
 */
export function parseEnv(text) {
  const env = {};
  (text || "").split(/\r?\n/).forEach((raw, i) => {
    const line = raw.trim();
    if (!line || line.startsWith("#")) return;
    const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line);
    if (!m) throw new Error(`environment line ${i + 1}: write NAME=value (got “${line.slice(0, 40)}”)`);
    env[m[1]] = m[2];
  });
  return env;
}

// -- the attention queue ------------------------------------------------------------------------

/** The queue's order of states: who needs the user first. Unknown states (a cluster's
 * `unreachable`) go just before `lost`. */
export const STATE_ORDER = ["blocked", "working", "idle", "exited", "unreachable", "lost"];

function stateRank(state) {
  const i = STATE_ORDER.indexOf(state);
  return i < 0 ? STATE_ORDER.indexOf("unreachable") : i;
}

/** The queue: blocked first (the longest waiting first), then working, idle, exited, lost;
 * within a state, by creation. */
export function queueOrder(sessions) {
  return [...sessions]
    .sort((a, b) => stateRank(a.state) - stateRank(b.state)
      || (a.state === "blocked" ? (a.since ?? 0) - (b.since ?? 0) : 0)
      || (a.created ?? 0) - (b.created ?? 0)
      || String(a.id).localeCompare(String(b.id)))
    .map((s) => s.id);
}

/** How many sessions are in each state (every state present, `lost` too), in queue order. */
export function stateCounts(sessions) {
  const counts = new Map();
  for (const s of sessions) counts.set(s.state, (counts.get(s.state) || 0) + 1);
  return [...counts.entries()].sort((a, b) => stateRank(a[0]) - stateRank(b[0]));
}

/** At most `n` characters, with an ellipsis. */
export function clip(text, n) {
  const s = String(text ?? "");
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}

// a row that is a rule or box border only (─ ━ ═ ╌ ┄ and the box corners), or blank
const RULE_ROW = /^[\s─━═╌╍┄┅┈┉│┃╭╮╯╰┌┐└┘├┤┬┴┼-]*$/;
// a solid rule: where a dialog starts
const SOLID_RULE = /^\s*[─━═]{10,}\s*$/;

function lastTextRow(rows, end) {
  for (let i = end - 1; i >= 0; i--) {
    const row = String(rows[i] ?? "");
    if (!RULE_ROW.test(row)) return clip(row.trim(), 240);
  }
  return "";
}

/** The screen's last line worth showing in a row: not blank, not a border, and above an input
 * box drawn between two rules at the bottom (Claude's, Codex's), where the agent's last words
 * are; clipped. */
export function lastLine(rows) {
  const all = rows || [];
  let end = all.length;
  while (end > 0 && !String(all[end - 1] ?? "").trim()) end--;
  const rules = [];
  for (let i = end - 1; i >= 0 && rules.length < 2; i--) if (SOLID_RULE.test(all[i])) rules.unshift(i);
  if (rules.length === 2 && rules[1] - rules[0] <= 4 && end - rules[1] <= 6) {
    const above = lastTextRow(all, rules[0]);
    if (above) return above;
  }
  return lastTextRow(all, all.length);
}

/** A folder short enough for a row: "~/…" under a home, and only its last two parts when long. */
export function shortFolder(path, max = 28) {
  const p = shortPath(path);
  if (p.length <= max) return p;
  const parts = p.split("/").filter(Boolean);
  const tail = parts.slice(-2).join("/");
  return `…/${tail.length > max ? parts[parts.length - 1] : tail}`;
}

function optionRow(rows, option) {
  // the last row showing the first option: a numbered one ("❯ 1. Yes") or a menu row by its label
  const label = String(option.label || "").slice(0, 24);
  const numbered = option.option != null;
  for (let i = rows.length - 1; i >= 0; i--) {
    const row = String(rows[i] ?? "");
    if (numbered) {
      const m = /^\s*(?:[❯›>▶●]\s*)?(\d+)[.)]\s+(.*)$/.exec(row);
      if (m && Number(m[1]) === option.option && m[2].startsWith(label.slice(0, 8))) return i;
    } else if (label && row.includes(label)) {
      return i;
    }
  }
  return -1;
}

/**
 * What a blocked pane shows of its question, read by the page from the screen until the server
 * sends the request itself: the lines of the dialog above its first answer (after the solid rule
 * that opens it), or the cursor's line for a one-line prompt (`[y/N]`, a password). At most three
 * lines (the first, then the last two), each clipped; text only.
 */
export function screenExcerpt(view) {
  const rows = (view && view.rows) || [];
  const prompt = view && view.prompt;
  const options = prompt && Array.isArray(prompt.options) ? prompt.options : [];
  let lines = [];
  const first = prompt && prompt.kind === "options" && options.length ? optionRow(rows, options[0]) : -1;
  if (first > 0) {
    let top = first - 1;
    while (top > 0 && !SOLID_RULE.test(rows[top]) && first - top < 40) top--;
    lines = rows.slice(SOLID_RULE.test(rows[top]) ? top + 1 : top, first).filter((r) => !RULE_ROW.test(r));
  } else {
    const at = view && view.cursor ? view.cursor.row : -1;
    const row = at >= 0 ? String(rows[at] ?? "") : "";
    lines = RULE_ROW.test(row) ? [lastLine(rows)] : [row];
  }
  lines = lines.map((l) => clip(String(l).trim(), 200)).filter(Boolean);
  if (lines.length > 3) lines = [lines[0], "…", ...lines.slice(-2)];
  return lines;
}

/**
 * The answers a prompt offers, as the page's buttons: {label, answer, selected, key} where
 * `answer` is what POST /answer takes ({option: N} or {keys}), and `key` the digit that picks it
 * from the keyboard (its own number for a numbered menu, else its place).
 */
export function answerChoices(prompt) {
  if (!prompt) return [];
  const choices = [];
  // an ACP permission names its request: the answer is for that one, never a newer one
  const request = typeof prompt.request === "string" ? { request: prompt.request } : {};
  if (prompt.kind === "options") {
    prompt.options.forEach((o, i) => {
      const numbered = o.option != null;
      choices.push({
        label: numbered ? `${o.option}. ${o.label}` : o.label,
        answer: numbered ? { option: o.option, ...request } : { keys: o.keys },
        selected: Boolean(o.selected),
        key: numbered ? (o.option <= 9 ? String(o.option) : null) : (i < 9 ? String(i + 1) : null),
        numbered,
      });
    });
  } else if (prompt.kind === "yes_no") {
    prompt.options.forEach((o, i) => {
      choices.push({ label: o.label, answer: { keys: o.keys }, selected: false, key: String(i + 1), numbered: false });
    });
  } else if (prompt.kind === "keys" || prompt.kind === "text") {
    choices.push({ label: "Enter", answer: { keys: "\r" }, selected: false, key: "1", numbered: false });
  }
  return choices;
}

/** What POST /answer's result means, as the line shown after it: [text, kind]. */
export function answerOutcome(r, label) {
  if (r.took) return [`✓ Took: sent ${label}; now ${r.state}.`, "ok"];
  if (r.state === "blocked") return [`✗ Did not take: still blocked after ${r.waited_s}s (${r.rule ?? "no rule"}).`, "warn"];
  return [`✗ Did not take: the agent did not react within ${r.waited_s}s (only an echo; now ${r.state}).`, "warn"];
}

/** A server message that already says "could not resume: …", without the repeat. */
export function resumeFailure(message) {
  const detail = String(message || "").replace(/^could not resume:\s*/i, "");
  return `Could not resume: ${detail || "the server refused"}`;
}

/** Whether a session matches the filter's words (every word, in its name, agent, folder, node,
 * branch, title, last line or request) and state. */
export function matchesFilter(session, extra, { text = "", state = null } = {}) {
  if (state && session.state !== state) return false;
  const words = text.toLowerCase().split(/\s+/).filter(Boolean);
  if (!words.length) return true;
  const req = session.request || {};
  const hay = [session.name, session.id, session.agent, session.cwd, session.node, session.worktree?.branch ?? session.branch, session.title,
    session.state, req.question, req.subject, req.tool, ...(extra || [])]
    .filter((v) => v != null).join("\n").toLowerCase();
  return words.every((w) => hay.includes(w));
}

/** The group a session goes under: its folder, or its node in a cluster. */
export function groupOf(session, by) {
  if (by === "node") return session.node || "this server";
  if (by === "folder") return session.cwd || "(no folder)";
  return "";
}
