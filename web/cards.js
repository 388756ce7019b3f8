// One card per session: name, agent, folder, state badge, the live screen, the prompt's
// options (answered only after an inline confirmation), a send box and delete/open-large.

import { AcpView, isAcp } from "./acp.js";
import { api } from "./api.js";
import { LiveSocket } from "./live.js";
import { formatDuration, shortPath } from "./parse.js";

const ESC_KEY = "\u001b";

/** Build an element: h("button", {class: "x", onclick: fn}, "text", child...). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value == null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key in el && typeof value !== "string") el[key] = value;
    else el.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child == null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/** A plain button: button("Delete", "delete danger", () => …). */
function button(label, cls, onclick, attrs = {}) {
  return h("button", { type: "button", class: cls, onclick, ...attrs }, label);
}

// Cells a code point takes in a terminal (pyte keeps one character per wide glyph).
function cellWidth(cp) {
  return (cp >= 0x1100 && cp <= 0x115f) || (cp >= 0x2e80 && cp <= 0xa4cf) || (cp >= 0xac00 && cp <= 0xd7a3)
    || (cp >= 0xf900 && cp <= 0xfaff) || (cp >= 0xfe30 && cp <= 0xfe4f) || (cp >= 0xff00 && cp <= 0xff60)
    || (cp >= 0xffe0 && cp <= 0xffe6) || (cp >= 0x1f300 && cp <= 0x1f64f) || (cp >= 0x1f900 && cp <= 0x1f9ff)
    || (cp >= 0x20000 && cp <= 0x3fffd) ? 2 : 1;
}


// pyte's colour names -> CSS colours (an xterm-like palette); hex values pass through.
const PALETTE = {
  black: "#2e3436", red: "#e06c75", green: "#98c379", brown: "#d19a66", blue: "#61afef",
  magenta: "#c678dd", cyan: "#56b6c2", white: "#dcdfe4",
  brightblack: "#5c6370", brightred: "#ff7b86", brightgreen: "#b5e890", brightbrown: "#e5c07b",
  brightblue: "#82c4ff", brightmagenta: "#de9bf0", brightcyan: "#7fd6e0", brightwhite: "#ffffff",
};

function cssColour(name) {
  if (!name) return "";
  if (/^[0-9a-f]{6}$/i.test(name)) return `#${name}`;
  return PALETTE[name] || "";
}

/** Index (in characters) of the character under screen column `col`, and the cells before it. */
function charAtColumn(chars, col) {
  let cells = 0;
  let i = 0;
  while (i < chars.length && cells + cellWidth(chars[i].codePointAt(0)) <= col) {
    cells += cellWidth(chars[i].codePointAt(0));
    i += 1;
  }
  return [i, cells];
}

/**
 * One screen row as DOM nodes: colour runs ([chars, fg, bg, flags] from the server) become
 * spans, and the cursor (if on this row) a span of its own.
 */
function rowNodes(row, runs, cursorCol) {
  let chars = Array.from(row || "");
  let cursorAt = -1;
  if (cursorCol !== null && cursorCol !== undefined) {
    const [i, cells] = charAtColumn(chars, cursorCol);
    if (i >= chars.length) chars = chars.concat(Array(Math.max(0, cursorCol - cells) + 1).fill(" "));
    cursorAt = i >= Array.from(row || "").length ? chars.length - 1 : i;
  }
  const pieces = []; // [start, end, style]
  let at = 0;
  for (const [n, fg, bg, flags] of runs || []) {
    pieces.push([at, Math.min(at + n, chars.length), { fg, bg, flags }]);
    at += n;
  }
  if (at < chars.length) pieces.push([at, chars.length, null]);
  const nodes = [];
  for (const [start, end, style] of pieces) {
    const parts = cursorAt >= start && cursorAt < end
      ? [[start, cursorAt, false], [cursorAt, cursorAt + 1, true], [cursorAt + 1, end, false]]
      : [[start, end, false]];
    for (const [a, b, isCursor] of parts) {
      if (b <= a) continue;
      const text = chars.slice(a, b).join("");
      if (!style && !isCursor) { nodes.push(text); continue; }
      const span = h("span", isCursor ? { class: "cursor" } : {}, text);
      if (style) {
        let fg = cssColour(style.fg);
        let bg = cssColour(style.bg);
        if (style.flags & 8) [fg, bg] = [bg || "var(--screen-bg, #0b0c10)", fg || "var(--screen-fg, #dcdfe4)"];
        if (fg) span.style.color = fg;
        if (bg) span.style.backgroundColor = bg;
        if (style.flags & 1) span.style.fontWeight = "bold";
        if (style.flags & 2) span.style.fontStyle = "italic";
        const lines = [style.flags & 4 ? "underline" : "", style.flags & 16 ? "line-through" : ""].filter(Boolean);
        if (lines.length) span.style.textDecoration = lines.join(" ");
      }
      nodes.push(span);
    }
  }
  return nodes;
}

export class Card {
  /**
   * @param {object} session the API's session object
   * @param {object} ctx {serverNow(): seconds, onLarge(card, open), onStateSeen()}
   */
  constructor(session, ctx) {
    this.id = session.id;
    this.ctx = ctx;
    this.session = session;
    this.rows = [];
    this.styles = [];
    this.cursor = null;
    this.screenSeen = false;
    this.options = [];
    this.optionsKey = "";
    this.pending = null; // the action awaiting confirmation
    this.busy = false;
    this.renderQueued = false;
    this.large = false;
    this.build();
    // ACP sessions: the conversation view replaces the screen and its prompt parsing
    this.acp = isAcp(session) ? new AcpView(this) : null;
    if (this.acp) this.screenEl.replaceWith(this.acp.el);
    this.update(session);
    this.screenSocket = new LiveSocket(`/ws/sessions/${encodeURIComponent(this.id)}/screen?styles=1`, {
      onMessage: (msg) => this.onFrame(msg),
      onDown: () => this.el.classList.add("screen-stale"),
      onUp: () => this.el.classList.remove("screen-stale"),
    }, { minDelay: 500, maxDelay: 10000, finalCodes: [4404] });
    this.screenSocket.start();
  }

  build() {
    const id = this.id;
    const nameId = `card-${id}-name`;
    this.nameEl = h("span", { class: "name" });
    this.stateEl = h("span", { class: "badge-state" });
    this.timeEl = h("span", { class: "badge-time" });
    this.badgeWhy = h("span", { class: "sr-only" });
    this.badge = h("span", { class: "badge" }, this.stateEl, " ", this.timeEl, this.badgeWhy);
    this.largeButton = button("Open large", "open-large", () => this.setLarge(!this.large),
      { "aria-expanded": "false" });
    this.deleteButton = button("Delete", "delete danger", () => this.askDelete());
    this.agentEl = h("span", { class: "agent" });
    this.cwdEl = h("span", { class: "cwd" });
    this.detailsEl = h("dl", { class: "details" });
    this.exitEl = h("p", { class: "exit", hidden: true });

    this.optionsEl = h("div", { class: "options", role: "group", "aria-label": "Answer the prompt" });
    this.promptNote = h("p", { class: "prompt-note" });
    this.promptEl = h("section", { class: "prompt", hidden: true, "aria-label": "Waiting for your answer" },
      h("h3", {}, "Waiting for your answer"), this.optionsEl, this.promptNote);

    this.confirmText = h("span", { class: "confirm-text" });
    this.confirmButton = button("Confirm", "confirm-yes primary", () => this.confirm());
    this.cancelButton = button("Cancel", "confirm-no", () => this.cancel(true));
    this.confirmEl = h("div", { class: "confirm", hidden: true, role: "group", "aria-label": "Confirm" },
      this.confirmText, this.confirmButton, this.cancelButton);
    this.confirmEl.addEventListener("keydown", (e) => {
      if (e.key !== "Escape") return;
      e.preventDefault();
      e.stopPropagation(); // not the large view's Escape
      this.cancel(true);
    });
    this.resultEl = h("p", { class: "result", role: "status", "aria-live": "polite" });

    this.screenEl = h("pre", { class: "screen", tabindex: "0", "aria-label": "Screen", "aria-live": "off" });

    this.sendInput = h("input", { type: "text", name: "text", class: "send-text", autocomplete: "off",
      spellcheck: "false", placeholder: "Type to the agent…", "aria-label": "Text to send" });
    this.sendButton = h("button", { type: "submit", class: "send-button" }, "Send");
    this.sendHint = h("p", { class: "send-hint", hidden: true }, "Blocked: answer the prompt first.");
    this.sendForm = h("form", { class: "send", onsubmit: (e) => { e.preventDefault(); this.send(); } },
      this.sendInput, this.sendButton);

    this.closeLarge = button("Close", "close-large", () => this.setLarge(false));

    this.el = h("article", { class: "card", id: `card-${id}`, "aria-labelledby": nameId, dataset: { id } },
      h("header", { class: "card-head" },
        h("h2", { id: nameId }, this.nameEl),
        this.badge,
        h("div", { class: "card-tools" }, this.largeButton, this.deleteButton, this.closeLarge)),
      h("p", { class: "meta" }, this.agentEl, h("span", { class: "sep", "aria-hidden": "true" }, " · "), this.cwdEl),
      this.detailsEl,
      this.exitEl,
      this.promptEl,
      this.confirmEl,
      this.resultEl,
      this.screenEl,
      this.sendForm,
      this.sendHint);
  }

  // -- the session's record (from /ws/state) ----------------------------------------------
  update(session) {
    const prevState = this.session.state;
    this.session = { ...this.session, ...session };
    const s = this.session;
    this.nameEl.textContent = s.name || s.id;
    this.screenEl.setAttribute("aria-label", `Screen of ${s.name || s.id}`);
    this.sendInput.setAttribute("aria-label", `Text to send to ${s.name || s.id}`);
    const agent = s.agent || "no agent";
    const launched = s.launched_agent && s.launched_agent !== s.agent ? ` (in ${s.launched_agent})` : "";
    this.agentEl.textContent = agent + launched;
    this.agentEl.title = Array.isArray(s.command) ? `command: ${s.command.join(" ")}` : "";
    this.cwdEl.textContent = shortPath(s.cwd);
    this.cwdEl.title = s.cwd || "";
    this.detailsEl.replaceChildren(
      ...[["id", s.id], ["pid", s.pid], ["foreground", s.foreground], ["command", (s.command || []).join(" ")],
        ["size", s.rows && s.cols ? `${s.rows}×${s.cols}` : null]]
        .filter(([, v]) => v != null && v !== "")
        .flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, String(v))]));

    this.el.dataset.state = s.state;
    this.badge.className = `badge badge-${s.state}`;
    this.stateEl.textContent = s.state;
    this.badge.title = `source: ${s.source ?? "—"} · rule: ${s.rule ?? "—"}${s.why ? `\n${s.why}` : ""}`;
    this.badgeWhy.textContent = ` (source ${s.source ?? "none"}, rule ${s.rule ?? "none"})`;
    this.tick();

    const exited = s.state === "exited";
    this.exitEl.hidden = !exited && !s.error;
    this.exitEl.textContent = [exited ? `Exited${s.exit_code != null ? ` with code ${s.exit_code}` : ""}.` : "",
      s.error || ""].filter(Boolean).join(" ");
    this.deleteButton.textContent = exited ? "Remove" : "Delete";

    const blocked = s.state === "blocked";
    this.sendInput.disabled = this.sendButton.disabled = blocked || exited;
    this.sendHint.hidden = !blocked;
    this.sendInput.placeholder = exited ? "The session has exited" : "Type to the agent…";
    if (prevState !== s.state && this.pending && this.pending.kind === "answer" && !blocked) this.cancel();
    if (this.acp) this.acp.update(s);
    this.renderPrompt();
  }

  /** Refresh the time-in-state (called every second). */
  tick() {
    const since = this.session.since;
    this.timeEl.textContent = since ? formatDuration(this.ctx.serverNow() - since) : "";
  }

  // -- the screen (from /ws/sessions/{id}/screen) -------------------------------------------
  onFrame(msg) {
    if (msg.type !== "screen") return;
    if (msg.full || !this.screenSeen) {
      this.rows = Array.isArray(msg.rows) ? msg.rows.slice() : this.rows;
      this.styles = Array.isArray(msg.styles) ? msg.styles.slice() : [];
    } else if (msg.changed) {
      for (const [index, text] of Object.entries(msg.changed)) this.rows[Number(index)] = text;
      for (const [index, runs] of Object.entries(msg.changed_styles || {})) this.styles[Number(index)] = runs;
    }
    if (msg.size && this.rows.length > msg.size.rows) this.rows.length = msg.size.rows;
    this.screenSeen = true;
    this.cursor = msg.cursor || null;
    if (msg.prompt !== undefined) this.prompt = msg.prompt; // decided on the server, from the matched rule
    if (msg.title !== undefined) this.session.title = msg.title;
    this.queueRender();
  }

  queueRender() {
    if (this.renderQueued) return;
    this.renderQueued = true;
    const run = () => { this.renderQueued = false; this.renderScreen(); };
    if (document.hidden) setTimeout(run, 250);
    else requestAnimationFrame(run);
  }

  renderScreen() {
    const pre = this.screenEl;
    const stick = !this.screenRendered || pre.scrollHeight - pre.scrollTop - pre.clientHeight < 8;
    let rows = this.rows;
    const c = this.cursor && !this.cursor.hidden ? this.cursor : null;
    if (!this.large) {
      // compact: no blank rows below the last text (or the cursor)
      let last = rows.length - 1;
      while (last >= 0 && !rows[last] && !(c && c.row === last)) last -= 1;
      rows = rows.slice(0, last + 1);
    }
    const frag = document.createDocumentFragment();
    rows.forEach((row, y) => {
      if (y > 0) frag.append("\n");
      frag.append(...rowNodes(row, this.styles[y], c && c.row === y ? c.col : null));
    });
    pre.replaceChildren(frag);
    this.screenRendered = true;
    if (stick) pre.scrollTop = pre.scrollHeight;
    this.renderPrompt();
  }

  // -- the prompt's options -----------------------------------------------------------------
  renderPrompt() {
    const blocked = this.session.state === "blocked" && !this.acp;
    this.promptEl.hidden = !blocked;
    if (!blocked) return;
    const options = (this.prompt && this.prompt.options) || [];
    const key = JSON.stringify(options);
    if (key === this.optionsKey && this.optionsEl.childElementCount) return; // keep focus and hover
    this.optionsKey = key;
    this.options = options;
    const buttons = options.map((o) => {
      // numbered menus answer with the option's number; the others carry their keys
      const label = o.option ? `${o.option}. ${o.label}` : o.label;
      return h("button", {
        type: "button",
        class: `option${o.selected ? " selected" : ""}`,
        dataset: { option: String(o.option ?? "") },
        onclick: () => this.ask({ kind: "answer", answer: o.option ? { option: o.option } : { keys: o.keys }, label }),
      }, label);
    });
    buttons.push(h("button", {
      type: "button", class: "option option-esc", title: "Press Esc (usually: cancel the prompt)",
      onclick: () => this.ask({ kind: "answer", answer: { keys: ESC_KEY }, label: "Esc" }),
    }, "Esc"));
    this.optionsEl.replaceChildren(...buttons);
    this.promptNote.textContent = options.length
      ? ""
      : this.screenSeen ? "No options found on the screen; read it below." : "Loading the screen…";
    if (this.pending && this.pending.kind === "answer" && this.pending.answer.option
        && !options.some((o) => o.option === this.pending.answer.option)) this.cancel();
  }

  // -- inline confirmation --------------------------------------------------------------------
  ask(action) {
    if (this.busy) return;
    if (!this.pending) this.returnFocus = document.activeElement;
    this.pending = action;
    const name = this.session.name || this.id;
    if (action.kind === "answer") {
      this.confirmText.textContent = `Send ${action.label} to ${name}?`;
      this.confirmButton.textContent = "Confirm";
    } else {
      this.confirmText.textContent = `Delete ${name}? This stops its process.`;
      this.confirmButton.textContent = "Delete";
    }
    this.confirmButton.className = action.kind === "delete" ? "confirm-yes danger" : "confirm-yes primary";
    this.confirmEl.hidden = false;
    this.confirmButton.focus();
  }

  /** Withdraw the question; `restoreFocus` when the user cancelled it. */
  cancel(restoreFocus = false) {
    const hadFocus = this.confirmEl.contains(document.activeElement);
    this.pending = null;
    this.confirmEl.hidden = true;
    if (hadFocus) {
      const back = restoreFocus && this.returnFocus && this.returnFocus.isConnected && !this.returnFocus.disabled
        ? this.returnFocus : this.screenEl;
      back.focus({ preventScroll: true });
    }
    this.returnFocus = null;
  }

  async confirm() {
    const action = this.pending;
    if (!action || this.busy) return;
    this.cancel();
    if (action.kind === "delete") return this.remove();
    this.setBusy(true);
    this.showResult(`Sending ${action.label}…`, "pending");
    try {
      const r = await api.answer(this.id, action.answer);
      if (r.took) this.showResult(`✓ Took: sent ${action.label}; now ${r.state}.`, "ok");
      else this.showResult(`✗ Did not take: still ${r.state} after ${r.waited_s}s (${r.rule ?? "no rule"}).`, "warn");
    } catch (err) {
      this.showResult(err.status === 409 ? `Not sent: ${err.message}` : `Failed: ${err.message}`,
        err.status === 409 ? "warn" : "error");
    } finally {
      this.setBusy(false);
    }
  }

  askDelete() {
    this.ask({ kind: "delete" });
  }

  async remove() {
    this.setBusy(true);
    this.showResult("Deleting…", "pending");
    try {
      await api.remove(this.id);
      this.ctx.onDeleted(this.id); // the "deleted" event would remove it too
    } catch (err) {
      this.showResult(`Delete failed: ${err.message}`, "error");
      this.setBusy(false);
    }
  }

  setBusy(busy) {
    this.busy = busy;
    this.el.toggleAttribute("aria-busy", busy);
    for (const b of this.optionsEl.querySelectorAll("button")) b.disabled = busy;
    this.deleteButton.disabled = busy;
  }

  showResult(text, kind) {
    this.resultEl.textContent = text;
    this.resultEl.dataset.kind = kind;
  }

  // -- the send box ---------------------------------------------------------------------------
  async send() {
    const text = this.sendInput.value;
    if (this.sendInput.disabled) return;
    this.sendButton.disabled = true;
    try {
      await api.send(this.id, text, true);
      const shown = text.length > 40 ? `${text.slice(0, 40)}…` : text;
      this.showResult(text ? `Sent “${shown}”.` : "Sent Enter.", "ok");
      if (this.sendInput.value === text) this.sendInput.value = "";
    } catch (err) {
      this.showResult(err.status === 409 ? `Not sent: ${err.message}` : `Send failed: ${err.message}`,
        err.status === 409 ? "warn" : "error");
    } finally {
      this.sendButton.disabled = this.sendInput.disabled;
    }
  }

  // -- large view -----------------------------------------------------------------------------
  setLarge(open) {
    if (this.large === open) return;
    this.large = open;
    this.el.classList.toggle("card-large", open);
    this.largeButton.setAttribute("aria-expanded", String(open));
    this.el.setAttribute("role", open ? "dialog" : "article");
    if (open) this.el.setAttribute("aria-modal", "true");
    else this.el.removeAttribute("aria-modal");
    this.ctx.onLarge(this, open);
    this.renderScreen();
    (open ? this.closeLarge : this.largeButton).focus();
  }

  /** The screen socket is down: try again now (the state socket is back). */
  resume() {
    this.screenSocket.retryNow();
  }

  destroy() {
    this.screenSocket.stop();
    if (this.acp) this.acp.destroy();
    if (this.large) this.setLarge(false);
    this.el.remove();
  }
}
