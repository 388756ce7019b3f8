// One card per session: name, title, agent, folder, a state badge that explains itself, the pane
// as a real terminal (keyboard, scrollback), the prompt's answers as the server decided them
// (each sent only after an inline confirmation), the held-back-keys notice, a send box, and
// delete / open large (a modal that fits the pane to the window).

import { AcpView, isAcp } from "./acp.js";
import { api } from "./api.js";
import { formatDuration, shortCommand, shortPath } from "./parse.js";
import { TermView } from "./term.js";

const ESC_KEY = "\u001b";
const RESULT_FADE_MS = 8000;
const RESULT_CLEAR_MS = 11000;

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

/** At most `n` characters (a long script as a command must not push the terminal out). */
function clip(text, n) {
  return text.length > n ? `${text.slice(0, n - 1)}…` : text;
}

// ACP sessions have no terminal: the page's socket handling finds nothing to do for them
const NO_SOCKET = { start() {}, stop() {}, drop() {}, retryNow() {} };

const FOCUSABLE = "button:not([disabled]), input:not([disabled]), select:not([disabled]), textarea:not([disabled]), "
  + "[tabindex]:not([tabindex='-1'])";

export class Card {
  /**
   * @param {object} session the API's session object
   * @param {object} ctx {serverNow(): seconds, onLarge(card, open), onDeleted(id), onAnswered(card)}
   */
  constructor(session, ctx) {
    this.id = session.id;
    this.ctx = ctx;
    this.session = session;
    this.prompt = null; // what the server says the blocked pane asks for
    this.promptKey = "";
    this.pending = null; // the action awaiting confirmation
    this.busy = false;
    this.large = false;
    this.sizeBeforeLarge = null;
    this.build();
    // ACP sessions: the conversation view replaces the terminal and its prompt
    this.acp = isAcp(session) ? new AcpView(this) : null;
    if (this.acp) {
      this.screenEl.replaceWith(this.acp.el);
      this.term = null;
      this.update(session);
      return;
    }
    this.term = new TermView(this.id, {
      onState: (msg) => this.onTermState(msg),
      onHeld: (msg) => this.showHeld(msg),
      onReleased: (msg) => this.released(msg),
      onError: (detail) => this.showResult(`Keys not sent: ${detail}`, "warn"),
      onTitle: (title) => this.setTitle(title),
      onLoaded: () => this.loaded(),
      onSize: (rows, cols) => { this.session.rows = rows; this.session.cols = cols; this.renderDetails(); },
      onUp: () => this.el.classList.remove("screen-stale"),
      onDown: () => this.el.classList.add("screen-stale"),
    });
    this.screenEl.append(this.term.host);
    this.update(session);
    this.term.start();
  }

  /** Compatibility with the page's socket handling (app.js stops/starts every card's socket). */
  get screenSocket() { return this.term ? this.term.socket : NO_SOCKET; }

  build() {
    const id = this.id;
    const nameId = `card-${id}-name`;
    const whyId = `card-${id}-why`;
    this.nameEl = h("span", { class: "name" });
    this.titleEl = h("span", { class: "term-title", hidden: true });
    this.stateEl = h("span", { class: "badge-state" });
    this.timeEl = h("span", { class: "badge-time" });
    this.badge = h("button", { type: "button", class: "badge", "aria-expanded": "false", "aria-controls": whyId,
      onclick: () => this.toggleWhy() }, this.stateEl, " ", this.timeEl);
    this.whyEl = h("p", { class: "why", id: whyId, hidden: true });
    this.largeButton = button("Open large", "open-large", () => this.setLarge(!this.large),
      { "aria-expanded": "false" });
    this.deleteButton = button("Delete", "delete danger", () => this.askDelete());
    this.agentEl = h("span", { class: "agent" });
    this.cwdEl = h("span", { class: "cwd" });
    // cluster: which machine the session runs on (absent on a lone server)
    this.nodeEl = h("span", { class: "node", hidden: true });
    this.detailsEl = h("dl", { class: "details" });
    this.exitEl = h("p", { class: "exit", hidden: true });
    this.buildLost();

    // the prompt: options / yes-no as buttons, a password field, Esc, and any keys
    this.optionsEl = h("div", { class: "options", role: "group", "aria-label": "Answer the prompt" });
    this.passwordInput = h("input", { type: "password", class: "password-text", autocomplete: "off",
      "aria-label": "Password to send" });
    this.passwordForm = h("form", { class: "password", hidden: true, onsubmit: (e) => {
      e.preventDefault();
      if (!this.passwordInput.value) return;
      this.ask({ kind: "answer", answer: { keys: `${this.passwordInput.value}\r` }, label: "the password", secret: true });
    } }, this.passwordInput, h("button", { type: "submit" }, "Send password"));
    this.keysInput = h("input", { type: "text", class: "keys-text", autocomplete: "off", spellcheck: "false",
      placeholder: "keys, e.g. yes", "aria-label": "Keys to send to the prompt" });
    this.keysEnter = h("input", { type: "checkbox", class: "keys-enter", checked: true });
    this.keysForm = h("form", { class: "keys", onsubmit: (e) => {
      e.preventDefault();
      const text = this.keysInput.value;
      const enter = this.keysEnter.checked;
      if (!text && !enter) return;
      const shown = text.length > 30 ? `${text.slice(0, 30)}…` : text;
      this.ask({ kind: "answer", answer: { keys: text + (enter ? "\r" : "") },
        label: `“${shown}”${enter ? " and Enter" : ""}`, clear: this.keysInput });
    } }, this.keysInput, h("label", { class: "toggle" }, this.keysEnter, " Enter"),
    h("button", { type: "submit" }, "Send keys"));
    this.promptNote = h("p", { class: "prompt-note" });
    this.promptEl = h("section", { class: "prompt", hidden: true, "aria-label": "Waiting for your answer" },
      h("h3", {}, "Waiting for your answer"), this.optionsEl, this.passwordForm, this.keysForm, this.promptNote);

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

    this.heldText = h("span", { class: "held-text" });
    this.heldEl = h("div", { class: "held", hidden: true, role: "alert" }, this.heldText,
      button("Send anyway", "held-send", () => this.term.release(true)),
      button("Drop", "held-drop", () => this.term.release(false)));

    this.resultEl = h("p", { class: "result", role: "status", "aria-live": "polite" });

    this.screenEl = h("div", { class: "screen", role: "group",
      "aria-label": "Screen (click and type: keys go to the pane)" });

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
      this.titleEl,
      this.whyEl,
      h("p", { class: "meta" }, this.nodeEl, this.agentEl, h("span", { class: "sep", "aria-hidden": "true" }, " · "),
        this.cwdEl),
      this.detailsEl,
      this.exitEl,
      this.lostEl,
      this.promptEl,
      this.confirmEl,
      this.heldEl,
      this.resultEl,
      this.screenEl,
      this.sendForm,
      this.sendHint);
    this.el.addEventListener("keydown", (e) => this.trapFocus(e));
  }

  /** The card is in the page: the terminal can measure its font now. */
  mount() {
    this.term?.open();
  }

  // -- the session's record (from /ws/state) ----------------------------------------------
  update(session) {
    const prevState = this.session.state;
    this.session = { ...this.session, ...session };
    const s = this.session;
    this.nameEl.textContent = s.name || s.id;
    this.screenEl.setAttribute("aria-label", `Screen of ${s.name || s.id} (click and type: keys go to the pane)`);
    this.sendInput.setAttribute("aria-label", `Text to send to ${s.name || s.id}`);
    const agent = s.agent || "no agent";
    const launched = s.launched_agent && s.launched_agent !== s.agent ? ` (in ${s.launched_agent})` : "";
    this.agentEl.textContent = agent + launched;
    this.agentEl.title = Array.isArray(s.command) ? `command: ${shortCommand(s.command)}` : "";
    this.nodeEl.hidden = !s.node;
    this.nodeEl.textContent = s.node ? `on ${s.node} · ` : "";
    this.nodeEl.title = s.node ? `runs on node ${s.node}` : "";
    this.cwdEl.textContent = shortPath(s.cwd);
    this.cwdEl.title = s.cwd || "";
    if (s.title !== undefined) this.setTitle(s.title);
    this.renderDetails();

    this.el.dataset.state = s.state;
    this.badge.className = `badge badge-${s.state}`;
    this.stateEl.textContent = s.state;
    const why = `source: ${s.source ?? "—"} · rule: ${s.rule ?? "—"}${s.why ? `\n${s.why}` : ""}`;
    this.badge.title = why;
    this.badge.setAttribute("aria-label", `${s.state}: why? (source ${s.source ?? "none"}, rule ${s.rule ?? "none"})`);
    this.whyEl.textContent = why.replace("\n", " — ");
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
    if (prevState !== s.state) {
      if (this.pending && this.pending.kind === "answer" && !blocked) this.cancel();
      if (!blocked) this.prompt = null;
      if (blocked) this.term?.scrollToBottom(); // the prompt is on the live screen: show it
    }
    if (this.acp) this.acp.update(s);
    this.renderPrompt();
    this.renderLost(session, prevState);
  }

  renderDetails() {
    const s = this.session;
    this.detailsEl.replaceChildren(
      ...[["id", s.id], ["pid", s.pid], ["foreground", s.foreground], ["command", clip(shortCommand(s.command || []), 160)],
        ["size", s.rows && s.cols ? `${s.rows}×${s.cols}` : null]]
        .filter(([, v]) => v != null && v !== "")
        .flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, String(v))]));
  }

  setTitle(title) {
    this.session.title = title || "";
    this.titleEl.textContent = title || "";
    this.titleEl.hidden = !title;
    this.titleEl.title = title ? `terminal title: ${title}` : "";
  }

  toggleWhy(open = this.whyEl.hidden) {
    this.whyEl.hidden = !open;
    this.badge.setAttribute("aria-expanded", String(open));
  }

  /** Refresh the time-in-state (called every second). */
  tick() {
    const since = this.session.since;
    this.timeEl.textContent = since ? formatDuration(this.ctx.serverNow() - since) : "";
  }

  // -- a lost session: its last screen, why, and Resume where its agent can ---------------------
  buildLost() {
    this.lostWhy = h("p", { class: "lost-why" });
    this.lostNote = h("p", { class: "lost-note" });
    this.resumeButton = button("Resume", "resume primary", () => this.resumeLost());
    this.lostEl = h("section", { class: "lost", hidden: true, "aria-label": "Lost session" },
      h("h3", {}, "Lost"), this.lostWhy, this.lostNote, this.resumeButton);
  }

  /** Shown while the session is `lost`; the offer (`resume`) comes with the session's record, or
   * is asked for when a state event (which does not carry it) made the session lost. */
  renderLost(update, prevState) {
    const s = this.session;
    const lost = s.state === "lost";
    this.lostEl.hidden = !lost;
    this.el.classList.toggle("card-lost", lost);
    if (!lost) {
      this.lostOffer = null;
      return;
    }
    if (update.resume !== undefined) this.lostOffer = update.resume;
    else if (prevState !== "lost" || !this.lostOffer) this.fetchLostOffer();
    this.exitEl.hidden = true; // the lost section says why
    this.deleteButton.textContent = "Remove";
    this.sendInput.disabled = this.sendButton.disabled = true;
    this.sendInput.placeholder = "The session is lost";
    const why = s.error || s.why || "its pane is gone";
    this.lostWhy.textContent = `${why[0].toUpperCase()}${why.slice(1)}${/[.!?]$/.test(why) ? "" : "."} `
      + "The screen below is the last one seen.";
    const offer = this.lostOffer;
    this.resumeButton.hidden = !(offer && offer.possible);
    this.resumeButton.disabled = this.busy;
    this.lostNote.textContent = !offer ? "Checking whether it can be resumed…"
      : offer.possible ? "Resume starts its agent again on the same conversation, in the same folder."
        : `It cannot be resumed: ${offer.why}`;
  }

  async fetchLostOffer() {
    if (this.lostFetch) return;
    this.lostFetch = true;
    try {
      const info = await api.session(this.id);
      if (!this.destroyed) this.update(info);
    } catch {
      if (!this.destroyed) this.lostNote.textContent = "Could not ask whether it can be resumed.";
    } finally {
      this.lostFetch = false;
    }
  }

  async resumeLost() {
    if (this.busy) return;
    this.setBusy(true);
    this.resumeButton.disabled = true;
    this.showResult("Resuming…", "pending");
    try {
      const info = await api.resume(this.id);
      this.showResult("✓ Resumed: its agent runs again.", "ok");
      this.update(info);
    } catch (err) {
      this.showResult(`Could not resume: ${err.message}`, err.status === 409 ? "warn" : "error");
    } finally {
      this.setBusy(false);
      this.resumeButton.disabled = false;
    }
  }

  // -- the terminal channel -------------------------------------------------------------------
  onTermState(msg) {
    // the state itself comes from /ws/state only (the two channels may interleave); this
    // channel brings the prompt the server read for it
    this.prompt = msg.state === "blocked" ? msg.prompt || null : null;
    this.renderPrompt();
    if (msg.title !== undefined && msg.title !== this.session.title) this.setTitle(msg.title);
  }

  loaded() {
    this.renderPrompt();
  }

  showHeld(msg) {
    this.heldText.textContent = `A prompt appeared — check it before answering. ${msg.bytes} key byte${
      msg.bytes === 1 ? "" : "s"} held back.`;
    const wasHidden = this.heldEl.hidden;
    this.heldEl.hidden = false;
    if (wasHidden) this.term.scrollToBottom();
  }

  released(msg) {
    this.heldEl.hidden = true;
    if (msg.bytes) this.showResult(msg.sent ? `Sent the ${msg.bytes} held-back key bytes.` : "Dropped the held-back keys.",
      msg.sent ? "ok" : "warn");
  }

  // -- scroll across DOM moves (app.js moves cards to keep blocked ones first) -----------------
  saveScroll() {
    if (!this.term) return null;
    return { y: this.term.viewportY, bottom: this.term.atBottom, left: this.screenEl.scrollLeft };
  }

  restoreScroll(saved) {
    if (!saved || !this.term) return;
    if (saved.bottom) this.term.scrollToBottom();
    else this.term.scrollTo(saved.y);
    this.screenEl.scrollLeft = saved.left;
  }

  // -- the prompt ------------------------------------------------------------------------------
  renderPrompt() {
    const blocked = this.session.state === "blocked" && !this.acp; // the ACP view asks itself
    this.promptEl.hidden = !blocked;
    if (!blocked) {
      this.promptNote.textContent = "";
      return;
    }
    const p = this.prompt;
    const kind = p ? p.kind : null;
    const key = JSON.stringify(p ? [p.kind, p.options] : null);
    if (key !== this.promptKey || !this.optionsEl.childElementCount) {
      this.promptKey = key;
      const buttons = [];
      if (kind === "options") {
        for (const o of p.options) {
          // numbered options answer with their number; a menu without numbers with its keys
          const label = o.option != null ? `${o.option}. ${o.label}` : o.label;
          const answer = o.option != null ? { option: o.option } : { keys: o.keys };
          buttons.push(h("button", {
            type: "button", class: `option${o.selected ? " selected" : ""}`,
            dataset: o.option != null ? { option: String(o.option) } : {},
            onclick: () => this.ask({ kind: "answer", answer, label }),
          }, label));
        }
      } else if (kind === "yes_no") {
        for (const o of p.options) {
          buttons.push(h("button", {
            type: "button", class: "option option-yes-no",
            onclick: () => this.ask({ kind: "answer", answer: { keys: o.keys }, label: o.label }),
          }, o.label));
        }
      } else if (kind === "keys" || kind === "text") {
        buttons.push(h("button", {
          type: "button", class: "option option-enter", title: "Press Enter (usually: the selected choice)",
          onclick: () => this.ask({ kind: "answer", answer: { keys: "\r" }, label: "Enter" }),
        }, "Enter"));
      }
      buttons.push(h("button", {
        type: "button", class: "option option-esc", title: "Press Esc (usually: cancel the prompt)",
        onclick: () => this.ask({ kind: "answer", answer: { keys: ESC_KEY }, label: "Esc" }),
      }, "Esc"));
      const hadFocus = this.optionsEl.contains(document.activeElement);
      this.optionsEl.replaceChildren(...buttons);
      if (hadFocus) this.optionsEl.firstElementChild.focus({ preventScroll: true });
      this.passwordForm.hidden = kind !== "password";
      for (const b of this.optionsEl.querySelectorAll("button")) b.disabled = this.busy;
      if (this.pending && this.pending.kind === "answer" && this.pending.answer.option
          && !(kind === "options" && p.options.some((o) => o.option === this.pending.answer.option))) this.cancel();
    }
    if (!p) this.fetchPrompt();
    this.promptNote.textContent = !p
      ? "Reading the prompt… (the terminal below shows it; answer there or with Esc)"
      : kind === "keys" || kind === "text" ? "No choices found on the screen: answer in the terminal, or send keys."
        : kind === "password" ? "A password prompt: what you type here is sent as keys, not shown." : "";
  }

  /** The terminal channel is slow or down: ask the HTTP API what the prompt is. */
  fetchPrompt() {
    if (this.promptFetch || this.destroyed) return;
    this.promptFetch = setTimeout(async () => {
      try {
        const r = await api.screen(this.id); // the screen read model carries the prompt
        if (r.prompt && this.session.state === "blocked" && !this.prompt) {
          this.prompt = r.prompt;
          this.renderPrompt();
        }
      } catch {
        // the note says the terminal shows the prompt; the next state change tries again
      } finally {
        this.promptFetch = null;
        if (this.session.state === "blocked" && !this.prompt) this.renderPrompt();
      }
    }, 700);
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
        ? this.returnFocus : this.largeButton;
      back.focus({ preventScroll: true });
    }
    this.returnFocus = null;
  }

  async confirm() {
    const action = this.pending;
    if (!action || this.busy) return;
    this.cancel();
    if (action.kind === "delete") return this.remove();
    if (action.secret) this.passwordInput.value = "";
    if (action.clear) action.clear.value = "";
    this.setBusy(true);
    this.showResult(`Sending ${action.label}…`, "pending");
    this.ctx.onAnswered?.(this);
    try {
      const r = await api.answer(this.id, action.answer);
      if (r.took) this.showResult(`✓ Took: sent ${action.label}; now ${r.state}.`, "ok");
      else if (r.state === "blocked") {
        this.showResult(`✗ Did not take: still blocked after ${r.waited_s}s (${r.rule ?? "no rule"}).`, "warn");
      } else {
        this.showResult(`✗ Did not take: the agent did not react within ${r.waited_s}s (only an echo; now ${r.state}).`,
          "warn");
      }
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
    for (const b of this.promptEl.querySelectorAll("button")) b.disabled = busy;
    this.deleteButton.disabled = busy;
  }

  /** A result line; final ones fade after a while and then go. */
  showResult(text, kind) {
    clearTimeout(this.fadeTimer);
    clearTimeout(this.clearTimer);
    this.resultEl.classList.remove("fading");
    this.resultEl.textContent = text;
    this.resultEl.dataset.kind = kind;
    if (kind === "pending") return;
    this.fadeTimer = setTimeout(() => this.resultEl.classList.add("fading"), RESULT_FADE_MS);
    this.clearTimer = setTimeout(() => {
      this.resultEl.textContent = "";
      this.resultEl.classList.remove("fading");
    }, RESULT_CLEAR_MS);
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

  // -- large view: a modal that fits the pane to the window ------------------------------------
  setLarge(open) {
    if (this.large === open) return;
    this.large = open;
    this.el.classList.toggle("card-large", open);
    this.largeButton.setAttribute("aria-expanded", String(open));
    this.el.setAttribute("role", open ? "dialog" : "article");
    if (open) this.el.setAttribute("aria-modal", "true");
    else this.el.removeAttribute("aria-modal");
    this.ctx.onLarge(this, open);
    if (!this.term) {
      // no pane to fit
    } else if (open) {
      this.sizeBeforeLarge = this.term.size;
      requestAnimationFrame(() => this.fitToWindow());
    } else if (this.sizeBeforeLarge) {
      const { rows, cols } = this.sizeBeforeLarge;
      this.sizeBeforeLarge = null;
      if (rows !== this.term.size.rows || cols !== this.term.size.cols) this.term.resizePane(rows, cols);
    }
    (open ? this.closeLarge : this.largeButton).focus();
  }

  /** Large view: resize the pane to what fits (the agent gets SIGWINCH). */
  fitToWindow() {
    if (!this.large || !this.term) return;
    const size = this.term.proposeSize();
    if (size && (size.rows !== this.term.size.rows || size.cols !== this.term.size.cols)) {
      this.term.resizePane(size.rows, size.cols);
    }
  }

  /** Tab stays inside the large view (the terminal itself takes Tab as a key for the pane). */
  trapFocus(e) {
    if (!this.large || e.key !== "Tab") return;
    const items = [...this.el.querySelectorAll(FOCUSABLE)].filter((el) => el.offsetParent !== null || el === document.activeElement);
    if (!items.length) return;
    const first = items[0];
    const last = items[items.length - 1];
    if (e.shiftKey && document.activeElement === first) {
      e.preventDefault();
      last.focus();
    } else if (!e.shiftKey && document.activeElement === last) {
      e.preventDefault();
      first.focus();
    }
  }

  /** The socket is down: try again now (the state socket is back). */
  resume() {
    this.screenSocket.retryNow();
  }

  destroy() {
    clearTimeout(this.promptFetch);
    this.promptFetch = null;
    this.destroyed = true;
    clearTimeout(this.fadeTimer);
    clearTimeout(this.clearTimer);
    if (this.large) this.setLarge(false);
    this.term?.dispose();
    if (this.acp) this.acp.destroy();
    this.el.remove();
  }
}
