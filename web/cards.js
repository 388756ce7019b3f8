// One card per session: name, title, agent, folder, a state badge that explains itself, the pane
// as a real terminal (keyboard, scrollback), what a blocked pane asks and the answers the server
// decided (each sent only after an inline confirmation), the held-back-keys notice, a send box,
// and delete / rename / run again / open large (a modal that fits the pane to the window).
// The same card is the queue's detail view (mode "detail": the one live terminal beside the
// list, or the phone's second view) and, in the cards layout, one of many in a grid.

import { AcpView, isAcp } from "./acp.js";
import { Answering, ESC_KEY } from "./answering.js";
import { api } from "./api.js";
import { ChangesView } from "./changes.js";
import { h } from "./dom.js";
import { answerChoices, clip, formatDuration, resumeFailure, shortCommand, shortFolder, shortPath } from "./parse.js";
import { RequestView } from "./request.js";
import { RELEASE_KEY, TermView } from "./term.js";

/** A plain button: button("Delete", "delete danger", () => …). */
function button(label, cls, onclick, attrs = {}) {
  return h("button", { type: "button", class: cls, onclick, ...attrs }, label);
}

const WIDE = matchMedia("(min-width: 1000px)");

/** A launched argv without the hooks the server appended at launch (`--settings {"hooks": …}` at
 * its end, which may name the old session): starting it again adds the new session's own. Only
 * for a server that does not say a session's `spec` (what it was started with). */
function withoutAddedHooks(argv) {
  if (!Array.isArray(argv) || argv.length < 3) return argv;
  const [flag, value] = argv.slice(-2);
  if (flag !== "--settings") return argv;
  try {
    return JSON.parse(value)?.hooks ? argv.slice(0, -2) : argv;
  } catch {
    return argv;
  }
}

// ACP sessions have no terminal: the page's socket handling finds nothing to do for them
const NO_SOCKET = { start() {}, stop() {}, drop() {}, retryNow() {} };

const FOCUSABLE = "button:not([disabled]), input:not([disabled]), select:not([disabled]), textarea:not([disabled]), "
  + "[tabindex]:not([tabindex='-1'])";

export class Card extends Answering {
  /**
   * @param {object} session the API's session object
   * @param {object} ctx {serverNow(): seconds, onLarge(card, open), onDeleted(id), onAnswered(card),
   *   onRelease(card), onClose(card), onCreated(session), fitMode(), setFitMode(mode), peek(id)}
   * @param {object} options mode: "card" (one of the grid) or "detail" (the queue's one terminal)
   */
  constructor(session, ctx, { mode = "card" } = {}) {
    super();
    this.id = session.id;
    this.ctx = ctx;
    this.mode = mode;
    this.session = session;
    this.prompt = null; // what the server says the blocked pane asks for
    this.promptKey = "";
    this.pending = null; // the action awaiting confirmation
    this.busy = false;
    this.large = false;
    this.build();
    // ACP sessions: the conversation view replaces the terminal and its prompt
    this.acp = isAcp(session) ? new AcpView(this) : null;
    if (this.acp) {
      this.termHint.hidden = true;
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
      onRelease: () => this.ctx.onRelease?.(this),
      onFocus: (inside) => this.renderHint(inside),
    }, { fill: this.fills(), fit: mode === "detail" ? this.fitMode() : "pane" });
    this.screenEl.append(this.term.host);
    this.renderHint(false);
    this.update(session);
    this.term.start();
  }

  fitMode() {
    return this.ctx.fitMode?.() || "pane";
  }

  /** Whether the terminal fits the rows to its box's height too: beside the list (a box of the
   * window's height), or to fit the view; on a phone the pane keeps its own shape and the page
   * scrolls. */
  fills() {
    return this.mode === "detail" && (WIDE.matches || this.fitMode() === "view");
  }

  renderHint(inside) {
    this.termHint.classList.toggle("active", inside);
    if (inside) {
      this.termHint.replaceChildren("Typing goes to the pane (Tab and Esc too); ", h("kbd", {}, RELEASE_KEY),
        " returns to the page.");
    } else {
      this.termHint.replaceChildren(this.mode === "detail" && WIDE.matches
        ? "Click the terminal (or press Enter on its row) to type into it."
        : "Click or tap the terminal to type into it.");
    }
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
      "aria-describedby": whyId, onclick: () => this.toggleWhy() }, this.stateEl, " ", this.timeEl,
    h("span", { class: "sr-only" }, ": why?"));
    this.whyEl = h("p", { class: "why", id: whyId, hidden: true });
    this.largeButton = button("Open large", "open-large", () => this.setLarge(!this.large),
      { "aria-expanded": "false" });
    this.deleteButton = button("Delete", "delete danger", () => this.askDelete());
    this.renameButton = button("Rename", "rename", () => this.startRename());
    this.ledgerButton = button("Ledger", "ledger-open", () => this.ctx.onLedger?.(this.id),
      { title: "Every decision on this session: who answered, typed or sent what, and what they saw" });
    this.accessButton = button("Who sees it", "access-card needs-owner", () => this.ctx.onAccess?.(this.id),
      { title: "Restrict this session to chosen users, or open it to everyone (owners)" });
    this.againButton = button("Run again", "run-again", () => this.runAgain(), { hidden: true,
      title: "Start the same command again, in the same folder, with the same environment" });
    this.fitPane = button("Fit to pane", "fit-pane", () => this.ctx.setFitMode?.("pane"),
      { title: "Keep the pane's size; scale the font so every column shows", "aria-keyshortcuts": "F" });
    this.fitView = button("Fit to view", "fit-view", () => this.ctx.setFitMode?.("view"),
      { title: "Resize the pane to this view at a readable font (the agent sees the new size)", "aria-keyshortcuts": "F" });
    this.fitGroup = h("div", { class: "fit", role: "group", "aria-label": "Terminal size" }, this.fitPane, this.fitView);
    this.backButton = button("← Sessions", "detail-close", () => this.ctx.onClose?.(this),
      { title: "Back to the list (Esc)", "aria-keyshortcuts": "Escape" });
    this.renameInput = h("input", { type: "text", class: "rename-text", maxlength: "80", autocomplete: "off",
      "aria-label": "New name" });
    this.renameForm = h("form", { class: "rename-form", hidden: true, onsubmit: (e) => { e.preventDefault(); this.rename(); } },
      this.renameInput, h("button", { type: "submit", class: "primary" }, "Save"),
      button("Cancel", "rename-cancel", () => this.endRename(true)));
    this.renameForm.addEventListener("keydown", (e) => {
      if (e.key !== "Escape") return;
      e.preventDefault();
      e.stopPropagation();
      this.endRename(true);
    });
    this.agentEl = h("span", { class: "agent" });
    this.cwdEl = h("span", { class: "cwd" });
    // cluster: which machine the session runs on (absent on a lone server)
    this.nodeEl = h("span", { class: "node", hidden: true });
    this.detailsEl = h("dl", { class: "details" });
    this.changes = new ChangesView(this); // a worktree session: its branch, changes and review
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
    this.requestView = new RequestView();
    this.promptEl = h("section", { class: "prompt", hidden: true, "aria-label": "Waiting for your answer" },
      h("h3", {}, "Waiting for your answer"), this.requestView.el, this.optionsEl, this.passwordForm, this.keysForm,
      this.promptNote);

    this.buildConfirm("Confirm");

    this.heldText = h("span", { class: "held-text" });
    this.heldEl = h("div", { class: "held", hidden: true, role: "alert" }, this.heldText,
      button("Send anyway", "held-send", () => this.term.release(true)),
      button("Drop", "held-drop", () => this.term.release(false)));

    this.buildResult();

    this.screenEl = h("div", { class: "screen", role: "group",
      "aria-label": `Screen (click and type: keys go to the pane; ${RELEASE_KEY} returns to the page)` });
    // one line, always there (its text changes, its height does not: a pane fitted to the view
    // must not be resized because the terminal took the keyboard)
    this.termHint = h("p", { class: "term-hint" });

    this.sendInput = h("input", { type: "text", name: "text", class: "send-text", autocomplete: "off",
      spellcheck: "false", placeholder: "Type to the agent…", "aria-label": "Text to send" });
    this.sendButton = h("button", { type: "submit", class: "send-button" }, "Send");
    this.sendHint = h("p", { class: "send-hint", hidden: true }, "Blocked: answer the prompt first.");
    this.sendForm = h("form", { class: "send", onsubmit: (e) => { e.preventDefault(); this.send(); } },
      this.sendInput, this.sendButton);

    this.closeLarge = button("Close", "close-large", () => this.setLarge(false));

    const detail = this.mode === "detail";
    this.el = h("article", { class: detail ? "card card-detail" : "card", id: `card-${id}`, "aria-labelledby": nameId,
      dataset: { id } },
      h("header", { class: "card-head" },
        detail ? this.backButton : null,
        h("h2", { id: nameId, tabindex: "-1" }, this.nameEl),
        this.badge,
        h("div", { class: "card-tools" }, detail ? this.fitGroup : this.largeButton, this.againButton, this.renameButton,
          this.ledgerButton, this.accessButton, this.deleteButton, this.closeLarge)),
      this.renameForm,
      this.titleEl,
      this.whyEl,
      h("p", { class: "meta" }, this.nodeEl, this.agentEl, h("span", { class: "sep", "aria-hidden": "true" }, " · "),
        this.cwdEl),
      this.changes.el,
      this.detailsEl,
      this.exitEl,
      this.lostEl,
      this.promptEl,
      this.confirmEl,
      this.heldEl,
      this.resultEl,
      this.termHint,
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
    this.screenEl.setAttribute("aria-label",
      `Screen of ${s.name || s.id} (click and type: keys go to the pane; ${RELEASE_KEY} returns to the page)`);
    this.renameButton.setAttribute("aria-label", `Rename ${s.name || s.id}`);
    this.sendInput.setAttribute("aria-label", `Text to send to ${s.name || s.id}`);
    const agent = s.agent || "no agent";
    const launched = s.launched_agent && s.launched_agent !== s.agent ? ` (in ${s.launched_agent})` : "";
    this.agentEl.textContent = agent + launched;
    this.agentEl.title = Array.isArray(s.command) ? `command: ${shortCommand(s.command)}` : "";
    // no manifest names the program: the generic rules decide, and the card says it is a guess
    const generic = s.agent === "generic";
    this.agentEl.classList.toggle("generic", generic);
    if (generic) this.agentEl.title = `generic rules, a best guess: no manifest names this program. ${this.agentEl.title}`.trim();
    this.nodeEl.hidden = !s.node;
    this.nodeEl.textContent = s.node ? `on ${s.node} · ` : "";
    this.nodeEl.title = s.node ? `runs on node ${s.node}` : "";
    this.cwdEl.textContent = this.mode === "detail" ? shortFolder(s.cwd, 48) : shortPath(s.cwd);
    this.cwdEl.title = s.cwd || "";
    if (s.title !== undefined) this.setTitle(s.title);
    this.renderDetails();
    this.changes.update(s);

    this.el.dataset.state = s.state;
    this.badge.className = `badge badge-${s.state}`;
    this.stateEl.textContent = s.state;
    const why = `source: ${s.source ?? "—"} · rule: ${s.rule ?? "—"}${s.why ? `\n${s.why}` : ""}`;
    this.badge.title = why;
    this.whyEl.textContent = why.replace("\n", " — ");
    this.tick();

    const exited = s.state === "exited";
    this.exitEl.hidden = !exited && !s.error;
    this.exitEl.textContent = [exited ? `Exited${s.exit_code != null ? ` with code ${s.exit_code}` : ""}.` : "",
      s.error || ""].filter(Boolean).join(" ");
    this.deleteButton.textContent = exited ? "Remove" : "Delete";
    this.againButton.hidden = !exited || Boolean(this.acp);
    this.renderFit();

    const blocked = s.state === "blocked";
    this.sendInput.disabled = this.sendButton.disabled = blocked || exited;
    this.sendHint.hidden = !blocked;
    this.sendInput.placeholder = exited ? "The session has exited" : "Type to the agent…";
    if (prevState !== s.state) {
      if (this.pending && this.pending.kind === "answer" && !blocked) this.cancel();
      if (!blocked) this.prompt = null;
      if (blocked) this.term?.scrollToBottom(); // the prompt is on the live screen: show it
    }
    if (!blocked) this.request = null;
    if (s.request !== undefined && blocked) this.request = s.request;
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
    // a Resume that failed is not offered again while the server's offer is the one it failed on
    const failed = this.resumeFailed && this.resumeFailed.offer === JSON.stringify(offer) ? this.resumeFailed : null;
    if (!failed) this.resumeFailed = null;
    this.resumeButton.hidden = !(offer && offer.possible) || Boolean(failed);
    this.resumeButton.disabled = this.busy;
    this.lostNote.textContent = failed ? `${failed.message}.`.replace(/\.\.$/, ".")
      : !offer ? "Checking whether it can be resumed…"
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
      // said once, where the offer was (not also as a result line), and not offered again
      this.resumeFailed = { message: resumeFailure(err.message), offer: JSON.stringify(this.lostOffer) };
      this.showResult("", "pending");
    } finally {
      this.setBusy(false);
      this.resumeButton.disabled = false;
      this.renderLost({}, "lost");
    }
  }

  // -- the terminal channel -------------------------------------------------------------------
  onTermState(msg) {
    // the state itself comes from /ws/state only (the two channels may interleave); this
    // channel brings the prompt the server read for it (and, once the server has it, the request)
    this.prompt = msg.state === "blocked" ? msg.prompt || null : null;
    if (msg.request !== undefined) this.request = msg.state === "blocked" ? msg.request : null;
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
    const peek = this.ctx.peek?.(this.id) || null;
    this.requestView.update({ ...this.session, request: this.request ?? this.session.request }, peek);
    const key = JSON.stringify(p ? [p.kind, p.options] : null);
    if (key !== this.promptKey || !this.optionsEl.childElementCount) {
      this.promptKey = key;
      // numbered options answer with their number; a menu without numbers with its keys
      const buttons = answerChoices(p).map((c) => h("button", {
        type: "button",
        class: `option${c.selected ? " selected" : ""}${kind === "yes_no" ? " option-yes-no" : ""}${
          kind === "keys" || kind === "text" ? " option-enter" : ""}`,
        title: kind === "keys" || kind === "text" ? "Press Enter (usually: the selected choice)" : null,
        dataset: c.answer.option != null ? { option: String(c.answer.option) } : {},
        onclick: () => this.ask({ kind: "answer", answer: c.answer, label: c.label }),
      }, c.label));
      buttons.push(h("button", {
        type: "button", class: "option option-esc", title: "Press Esc (usually: cancel the prompt)",
        onclick: () => this.ask({ kind: "answer", answer: { keys: ESC_KEY }, label: "Esc" }),
      }, "Esc"));
      const hadFocus = this.optionsEl.contains(document.activeElement);
      this.optionsEl.replaceChildren(...buttons);
      if (hadFocus) this.optionsEl.firstElementChild.focus({ preventScroll: true });
      this.passwordForm.hidden = kind !== "password";
      // beside its terminal, a prompt with choices needs no keys box: the terminal takes keys
      this.keysForm.hidden = this.mode === "detail" && (kind === "options" || kind === "yes_no");
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
  describe(action) {
    const name = this.session.name || this.id;
    if (action.kind === "answer") {
      this.confirmText.textContent = `Send ${action.label} to ${name}?`;
      this.confirmButton.textContent = "Confirm";
    } else if (action.kind === "discard") {
      const files = action.files.slice(0, 5).join(", ") + (action.files.length > 5 ? ` and ${action.files.length - 5} more` : "");
      this.confirmText.textContent = `The worktree of ${name} has uncommitted changes (${files}). `
        + "Delete it and lose them? Its branch is kept.";
      this.confirmButton.textContent = "Delete and discard";
    } else {
      this.confirmText.textContent = `Delete ${name}? This stops its process.`;
      this.confirmButton.textContent = "Delete";
    }
    this.confirmButton.className = action.kind === "answer" ? "confirm-yes primary" : "confirm-yes danger";
  }

  restingFocus() {
    return this.largeButton;
  }

  async confirm() {
    const action = this.pending;
    if (!action || this.busy) return;
    this.cancel();
    if (action.kind === "delete") return this.remove();
    if (action.kind === "discard") return this.remove(true);
    if (action.secret) this.passwordInput.value = "";
    if (action.clear) action.clear.value = "";
    await this.sendAnswer(action);
  }

  askDelete() {
    this.ask({ kind: "delete" });
  }

  async remove(discard = false) {
    this.setBusy(true);
    this.showResult("Deleting…", "pending");
    try {
      await api.remove(this.id, discard);
      this.ctx.onDeleted(this.id); // the "deleted" event would remove it too
    } catch (err) {
      if (err.status === 409 && Array.isArray(err.body?.files) && !discard) {
        // a dirty worktree: nothing was deleted; ask whether to lose its changes
        this.setBusy(false);
        this.showResult("", "");
        this.ask({ kind: "discard", files: err.body.files });
        return;
      }
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
    // large: the pane resized to the window; closed: back to its size, the font fitted again
    if (open) this.term?.setFit("view", { fill: true });
    else this.term?.setFit(this.mode === "detail" ? this.fitMode() : "pane", { fill: this.fills() });
    (open ? this.closeLarge : this.largeButton).focus();
  }

  /** Large view: resize the pane to what fits (the agent gets SIGWINCH). */
  fitToWindow() {
    if (this.large) this.term?.scheduleFit();
  }

  // -- fit, rename, run again -------------------------------------------------------------------
  /** The page's fit mode changed (or the card was made): the detail's terminal follows it. */
  applyFit() {
    if (this.mode === "detail" && !this.large) this.term?.setFit(this.fitMode(), { fill: this.fills() });
    this.renderFit();
  }

  renderFit() {
    const mode = this.fitMode();
    this.fitPane.setAttribute("aria-pressed", String(mode === "pane"));
    this.fitView.setAttribute("aria-pressed", String(mode === "view"));
    this.fitGroup.hidden = Boolean(this.acp);
  }

  startRename() {
    this.renameInput.value = this.session.name || "";
    this.renameForm.hidden = false;
    this.renameButton.hidden = true;
    this.renameInput.focus();
    this.renameInput.select();
  }

  endRename(restoreFocus = false) {
    this.renameForm.hidden = true;
    this.renameButton.hidden = false;
    if (restoreFocus) this.renameButton.focus({ preventScroll: true });
  }

  async rename() {
    const name = this.renameInput.value.trim();
    if (!name || name === this.session.name) {
      this.endRename(true);
      return;
    }
    try {
      const info = await api.rename(this.id, name);
      this.endRename(true);
      this.ctx.onRenamed?.({ ...(info && info.id ? info : {}), id: this.id, name: info && info.name ? info.name : name });
      this.showResult(`Renamed to “${clip(name, 40)}”.`, "ok");
    } catch (err) {
      const missing = err.status === 404 && !/session/i.test(err.message) || err.status === 405;
      this.showResult(missing ? "This server cannot rename sessions (no PATCH /api/sessions/{id})."
        : `Rename failed: ${err.message}`, err.status === 409 || missing ? "warn" : "error");
    }
  }

  /** The same command, folder and environment, started again as a new session. */
  async runAgain() {
    const s = this.session;
    const given = s.spec && typeof s.spec === "object" ? s.spec : null;
    const spec = given ? { ...given }
      : { command: withoutAddedHooks(s.command), cwd: s.cwd, ...(s.agent ? { agent: s.agent } : {}) };
    for (const key of Object.keys(spec)) if (spec[key] == null) delete spec[key];
    if (s.name) spec.name = s.name;
    if (s.node && !spec.node) spec.node = s.node;
    this.againButton.disabled = true;
    this.showResult("Starting it again…", "pending");
    try {
      const made = await api.create(spec);
      const note = `Started again as ${made.name} (${made.id})${given ? "" : " — same command and folder; "
        + "this server does not say its environment"}.`;
      this.showResult(note, "ok");
      this.ctx.onCreated?.(made, note); // the queue shows the new one, with this line
    } catch (err) {
      this.showResult(`Could not start it again: ${err.message}`, err.status === 409 ? "warn" : "error");
    } finally {
      this.againButton.disabled = false;
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
    this.stopResult();
    if (this.large) this.setLarge(false);
    this.term?.dispose();
    this.changes.destroy();
    if (this.acp) this.acp.destroy();
    this.el.remove();
  }
}
