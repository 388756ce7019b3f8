// Pure helpers (no DOM): parsing a command line, formatting durations, ordering cards. Kept
// free of side effects so the tests can import and call them. (The prompt's options come from
// the server's screen payload: the browser parses no screen text.)

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
