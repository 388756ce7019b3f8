// A worktree session's changes on its card: the branch and "+N −M in K files", and a diff view (a
// small renderer of our own: one row a line, old and new line numbers). Lines of a file can be
// selected (click, Shift+click for a range) and commented on; the comment goes to the agent as a
// guarded send ("In app.py lines 10–14: …"), refused while the pane is blocked like any send.

import { api } from "./api.js";
import { el } from "./dom.js";

/** How often an open card asks again (the server answers from its cache when nothing moved). */
const POLL_MS = 4000;

/** "+3 −1 in 2 files" */
export function changeSummary(c) {
  const files = c.files_total === 1 ? "1 file" : `${c.files_total} files`;
  return `+${c.added} −${c.removed} in ${files}`;
}

/** The rows of one file's unified diff: {kind: "hunk"|"add"|"del"|"ctx", text, old, new, line}. */
export function diffRows(diff) {
  const rows = [];
  let oldNo = 0;
  let newNo = 0;
  let inHunk = false;
  for (const text of diff.split("\n")) {
    const hunk = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(text);
    if (hunk) {
      oldNo = Number(hunk[1]);
      newNo = Number(hunk[2]);
      inHunk = true;
      rows.push({ kind: "hunk", text });
    } else if (!inHunk || text.startsWith("\\")) {
      continue; // the file's header lines, "\ No newline at end of file"
    } else if (text.startsWith("+")) {
      rows.push({ kind: "add", text: text.slice(1), old: null, new: newNo, line: newNo });
      newNo += 1;
    } else if (text.startsWith("-")) {
      rows.push({ kind: "del", text: text.slice(1), old: oldNo, new: null, line: Math.max(newNo, 1) });
      oldNo += 1;
    } else if (text.startsWith(" ")) {
      rows.push({ kind: "ctx", text: text.slice(1), old: oldNo, new: newNo, line: newNo });
      oldNo += 1;
      newNo += 1;
    }
  }
  return rows;
}

/** "In app.py lines 10–14: …" (one line: "line 10"). */
export function reviewText(path, from, to, comment) {
  const lines = from === to ? `line ${from}` : `lines ${from}–${to}`;
  return `In ${path} ${lines}: ${comment.trim()}`;
}

export class ChangesView {
  /** @param card the session's card (its id, its result line) */
  constructor(card) {
    this.card = card;
    this.id = card.id;
    this.worktree = null;
    this.changes = null;
    this.shown = ""; // what the open diff shows (a new answer redraws it only when it differs)
    this.selection = null; // {path, from, to, anchor}
    this.timer = null;
    this.branchEl = el("span", { class: "branch" });
    this.toggle = el("button", { type: "button", class: "changes-summary", "aria-expanded": "false",
      onclick: () => this.setOpen(this.diffEl.hidden) }, "changes…");
    this.line = el("p", { class: "changes-line", hidden: true }, this.branchEl, " · ", this.toggle);
    this.filesEl = el("div", { class: "diff-files" });
    this.selectionEl = el("span", { class: "review-where" });
    this.comment = el("textarea", { class: "review-text", rows: "2", "aria-label": "Comment on the selected lines",
      placeholder: "Comment on the selected lines…" });
    this.reviewResult = el("p", { class: "review-result", role: "status", "aria-live": "polite" });
    this.reviewForm = el("form", { class: "review", hidden: true, onsubmit: (e) => { e.preventDefault(); this.send(); } },
      this.selectionEl, this.comment,
      el("button", { type: "submit", class: "primary review-send" }, "Send comment"),
      el("button", { type: "button", class: "review-clear", onclick: () => this.select(null) }, "Clear"));
    this.diffEl = el("section", { class: "diff-view", hidden: true, "aria-label": "Changes in the worktree" },
      this.filesEl, this.reviewForm, this.reviewResult);
    this.el = el("div", { class: "changes" }, this.line, this.diffEl);
  }

  update(session) {
    this.worktree = session.worktree || null;
    this.line.hidden = !this.worktree;
    if (!this.worktree) return this.stop();
    this.branchEl.textContent = `branch ${this.worktree.branch}`;
    this.branchEl.title = `${this.worktree.path} (from ${this.worktree.base})`;
    if (!this.timer) this.poll();
  }

  poll() {
    this.refresh().finally(() => {
      if (this.worktree && !this.destroyed) this.timer = setTimeout(() => this.poll(), POLL_MS);
    });
  }

  stop() {
    clearTimeout(this.timer);
    this.timer = null;
  }

  async refresh() {
    try {
      this.changes = await api.changes(this.id);
    } catch (err) {
      this.toggle.textContent = `changes unavailable: ${err.message}`;
      return;
    }
    const c = this.changes;
    this.toggle.textContent = changeSummary(c);
    this.toggle.title = `${c.ahead} commit(s) ahead of ${c.base}, ${c.behind} behind; click to review`;
    if (!this.diffEl.hidden) this.renderDiff();
  }

  setOpen(open) {
    this.diffEl.hidden = !open;
    this.toggle.setAttribute("aria-expanded", String(open));
    if (open) this.renderDiff();
  }

  renderDiff() {
    const c = this.changes;
    if (!c) return;
    const key = JSON.stringify(c.files);
    if (key === this.shown) return;
    this.shown = key;
    this.select(null);
    this.filesEl.replaceChildren(...(c.files.length ? c.files.map((f) => this.renderFile(f))
      : [el("p", { class: "diff-empty" }, "No changes yet.")]));
    if (c.files_total > c.files.length) {
      this.filesEl.append(el("p", { class: "diff-note" }, `${c.files_total - c.files.length} more files not listed.`));
    }
  }

  renderFile(f) {
    const head = el("h4", { class: "diff-file-head" }, el("span", { class: "diff-path" }, f.path),
      el("span", { class: `diff-status diff-${f.status}` }, f.status),
      f.added != null ? el("span", { class: "diff-counts" }, `+${f.added} −${f.removed}`) : null);
    if (f.diff == null) return el("div", { class: "diff-file" }, head, el("p", { class: "diff-note" }, f.summary || ""));
    const body = el("tbody");
    for (const row of diffRows(f.diff)) {
      if (row.kind === "hunk") {
        body.append(el("tr", { class: "diff-hunk" }, el("td", { colspan: "3" }, row.text)));
        continue;
      }
      const tr = el("tr", { class: `diff-line diff-${row.kind}`, "data-path": f.path, "data-line": String(row.line) },
        el("td", { class: "diff-no" }, row.old ?? ""), el("td", { class: "diff-no" }, row.new ?? ""),
        el("td", { class: "diff-code" }, row.text));
      tr.addEventListener("click", (e) => this.pick(f.path, row.line, e.shiftKey));
      body.append(tr);
    }
    return el("div", { class: "diff-file" }, head, el("table", { class: "diff" }, body));
  }

  /** A click on a line: a new selection, or (Shift) the range from the last click in the same file. */
  pick(path, line, extend) {
    const s = this.selection;
    if (extend && s && s.path === path) {
      this.select({ path, anchor: s.anchor, from: Math.min(s.anchor, line), to: Math.max(s.anchor, line) });
    } else {
      this.select({ path, anchor: line, from: line, to: line });
    }
  }

  select(selection) {
    this.selection = selection;
    for (const tr of this.filesEl.querySelectorAll("tr.diff-line")) {
      const n = Number(tr.dataset.line);
      tr.classList.toggle("selected", Boolean(selection) && tr.dataset.path === selection.path
        && n >= selection.from && n <= selection.to);
    }
    this.reviewForm.hidden = !selection;
    if (!selection) return;
    const { path, from, to } = selection;
    this.selectionEl.textContent = from === to ? `${path} line ${from}` : `${path} lines ${from}–${to}`;
    this.comment.focus({ preventScroll: true });
  }

  async send() {
    const s = this.selection;
    const comment = this.comment.value;
    if (!s || !comment.trim()) return;
    const text = reviewText(s.path, s.from, s.to, comment);
    this.reviewResult.dataset.kind = "pending";
    this.reviewResult.textContent = "Sending…";
    try {
      await api.send(this.id, text, true);
      this.reviewResult.dataset.kind = "ok";
      this.reviewResult.textContent = `Sent to the agent: “${text.length > 60 ? `${text.slice(0, 60)}…` : text}”`;
      if (this.comment.value === comment) this.comment.value = "";
    } catch (err) {
      this.reviewResult.dataset.kind = err.status === 409 ? "warn" : "error";
      this.reviewResult.textContent = err.status === 409 ? `Not sent: ${err.message}` : `Send failed: ${err.message}`;
    }
  }

  destroy() {
    this.destroyed = true;
    this.stop();
  }
}
