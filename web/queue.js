// The attention queue: one compact row per session — a state dot, name, agent, folder (and
// branch, node), how long in this state and the screen's last line; a blocked one also says
// what it asks and carries its answer buttons (each sent only after an inline confirmation).
// Rows have no terminal: what they show of a screen comes from GET /api/sessions/{id}/screen,
// read when the session changes state (and now and then while it works).

import { Answering, ESC_KEY } from "./answering.js";
import { api } from "./api.js";
import { el } from "./dom.js";
import { answerChoices, formatDuration, lastLine, screenExcerpt, shortFolder } from "./parse.js";
import { RequestView } from "./request.js";

const REFRESH_MS = 10000; // how old a working session's last line may get
const SETTLE_MS = [2000, 6000]; // an idle screen is read again these long after each read that follows its change
export const RETRY_MS = 700; // a blocked state the screen read model has not caught up with yet
const PARALLEL = 3;

/**
 * What the page read of each session's screen ({state, prompt, request, excerpt, lastLine}),
 * a few requests at a time, at most one in flight per session.
 */
export class Peeks {
  constructor(onPeek) {
    this.onPeek = onPeek;
    this.peeks = new Map();
    this.wanted = new Map(); // id -> {due, tries}
    this.inFlight = new Map(); // id -> the read's promise
    this.held = new Set(); // sessions about to be deleted: no new reads
    this.settled = new Map(); // id -> {since, n}: re-reads done since that change
    this.timer = null;
  }

  /** No more reads of this session; resolves once the one in flight (if any) is done. */
  async hold(id) {
    this.held.add(id);
    this.wanted.delete(id);
    await this.inFlight.get(id);
  }

  get(id) {
    return this.peeks.get(id) || null;
  }

  /** Read the session's screen (again) after `delay` ms. */
  want(id, delay = 0, tries = 0) {
    if (this.held.has(id)) return;
    const due = Date.now() + delay;
    const had = this.wanted.get(id);
    if (!had || had.due > due) this.wanted.set(id, { due, tries });
    this.pump();
  }

  forget(id) {
    this.peeks.delete(id);
    this.wanted.delete(id);
    this.held.delete(id);
    this.settled.delete(id);
  }

  /**
   * Sessions whose last line is older than REFRESH_MS (working ones: their screens move), and
   * idle or exited ones read twice more (SETTLE_MS) after the read their change caused: that read
   * can come before the agent's last frame, and a quiet session sends no other change.
   */
  refreshStale(sessions) {
    const now = Date.now();
    for (const s of sessions) {
      if (s.kind === "acp") continue;
      const p = this.peeks.get(s.id);
      if (s.state === "working") {
        if (!p || now - p.at > REFRESH_MS) this.want(s.id, Math.random() * 2000);
      } else if (s.state !== "blocked" && p && p.since === s.since) {
        const had = this.settled.get(s.id);
        const n = had && had.since === s.since ? had.n : 0;
        if (n < SETTLE_MS.length && now - p.at > SETTLE_MS[n]) {
          this.settled.set(s.id, { since: s.since, n: n + 1 });
          this.want(s.id);
        }
      }
    }
  }

  pump() {
    clearTimeout(this.timer);
    this.timer = null;
    const now = Date.now();
    let next = Infinity;
    for (const [id, w] of [...this.wanted.entries()].sort((a, b) => a[1].due - b[1].due)) {
      if (this.inFlight.has(id)) continue;
      if (w.due > now) {
        next = Math.min(next, w.due);
        continue;
      }
      if (this.inFlight.size >= PARALLEL) break;
      this.wanted.delete(id);
      this.fetch(id, w.tries);
    }
    if (next < Infinity) this.timer = setTimeout(() => this.pump(), next - now);
  }

  fetch(id, tries) {
    const read = this.read(id, tries);
    this.inFlight.set(id, read);
    return read;
  }

  async read(id, tries) {
    try {
      const view = await api.screen(id);
      const peek = {
        at: Date.now(),
        state: view.state,
        prompt: view.state === "blocked" ? view.prompt || null : null,
        request: view.state === "blocked" ? view.request || null : null,
        // an ACP permission (the only prompt with a title) says itself what it asks
        excerpt: view.state !== "blocked" ? []
          : view.prompt && typeof view.prompt.title === "string" ? [view.prompt.title] : screenExcerpt(view),
        lastLine: lastLine(view.rows),
      };
      this.peeks.set(id, peek);
      this.onPeek(id, peek, tries);
    } catch {
      // deleted meanwhile, or the server is away: the next state change reads it again
    } finally {
      this.inFlight.delete(id);
      this.pump();
    }
  }
}

export class Row extends Answering {
  /**
   * @param {object} session the API's session object
   * @param {object} ctx {serverNow(), peek(id), onOpen(row, {enter}), onAnswered(row), onFocus(row)}
   */
  constructor(session, ctx) {
    super();
    this.id = session.id;
    this.ctx = ctx;
    this.session = session;
    this.pending = null;
    this.busy = false;
    this.choices = [];
    this.choicesKey = "";
    this.build();
    this.update(session);
  }

  build() {
    const id = this.id;
    const metaId = `row-${id}-meta`;
    this.nameEl = el("span", { class: "row-name" });
    this.openButton = el("button", { type: "button", class: "row-open", "aria-describedby": metaId,
      "aria-controls": "detail", "aria-expanded": "false", "aria-keyshortcuts": "Enter",
      title: "Show its terminal (Enter: show it and type into it)",
      onclick: () => this.ctx.onOpen(this, { enter: false }),
      onkeydown: (e) => {
        if (e.key !== "Enter" || e.shiftKey || e.ctrlKey || e.altKey || e.metaKey) return;
        e.preventDefault(); // Enter enters the terminal; a click (or Space) only shows it
        this.ctx.onOpen(this, { enter: true });
      } }, this.nameEl);
    this.stateEl = el("span", { class: "row-state" });
    this.timeEl = el("span", { class: "row-time" });
    this.agentEl = el("span", { class: "row-agent" });
    this.whereEl = el("span", { class: "row-where" });
    this.nodeEl = el("span", { class: "row-node" });
    this.metaEl = el("span", { class: "row-meta", id: metaId }, this.stateEl, " ", this.timeEl, " ",
      this.agentEl, this.whereEl, this.nodeEl);
    this.lineEl = el("p", { class: "row-line" });

    this.requestView = new RequestView();
    this.optionsEl = el("div", { class: "options row-options", role: "group" });
    this.buildConfirm("Confirm the answer");
    this.askEl = el("section", { class: "row-ask", hidden: true, "aria-label": "What it asks" },
      this.requestView.el, this.optionsEl, this.confirmEl);
    this.buildResult();

    this.el = el("li", { class: "row", id: `row-${id}`, dataset: { id } },
      el("div", { class: "row-head" }, el("span", { class: "dot", "aria-hidden": "true" }), this.openButton, this.metaEl),
      this.lineEl, this.askEl, this.resultEl);
    // a click on the row (not on one of its controls) shows the session too
    this.el.addEventListener("click", (e) => {
      if (e.target instanceof Element && e.target.closest("button, a, input, select, textarea")) return;
      this.ctx.onOpen(this, { enter: false });
    });
  }

  update(session) {
    const prevState = this.session.state;
    this.session = { ...this.session, ...session };
    if (prevState !== this.session.state) this.message = "";
    const s = this.session;
    const name = s.name || s.id;
    this.nameEl.textContent = name;
    this.el.dataset.state = s.state;
    this.stateEl.textContent = s.state;
    this.stateEl.className = `row-state state-${s.state}`;
    this.stateEl.title = `source: ${s.source ?? "—"} · rule: ${s.rule ?? "—"}${s.why ? `\n${s.why}` : ""}`;
    const agent = s.agent || "no agent";
    this.agentEl.textContent = s.launched_agent && s.launched_agent !== s.agent ? `${agent} (in ${s.launched_agent})` : agent;
    const where = [shortFolder(s.cwd), s.worktree?.branch ?? s.branch].filter(Boolean).join(" · ");
    this.whereEl.textContent = where ? ` · ${where}` : "";
    this.whereEl.title = s.cwd || "";
    this.nodeEl.textContent = s.node ? ` · on ${s.node}` : "";
    this.optionsEl.setAttribute("aria-label", `Answer ${name}`);
    this.tick();
    if (prevState !== s.state && this.pending && s.state !== "blocked") this.cancel();
    this.render();
  }

  setPeek() {
    this.render();
  }

  /** The agent's last desktop notification (OSC 9/99/777), shown until its state changes. */
  setMessage(text) {
    this.message = text || "";
    this.render();
  }

  get peek() {
    return this.ctx.peek(this.id);
  }

  /** The prompt the answers come from: the record's (once events carry it), else the screen's. */
  get prompt() {
    if (this.session.state !== "blocked") return null;
    if (this.session.prompt) return this.session.prompt;
    const p = this.peek;
    return p && p.state === "blocked" ? p.prompt : null;
  }

  render() {
    const s = this.session;
    const blocked = s.state === "blocked";
    const peek = this.peek;
    this.askEl.hidden = !blocked;
    this.lineEl.hidden = blocked;
    if (blocked) {
      this.requestView.update(s, peek && peek.state === "blocked" ? peek : null);
      this.renderChoices();
    } else {
      let line = "";
      if (s.state === "lost") line = s.error || s.why || "its pane is gone";
      else if (s.state === "exited") {
        line = [`exited${s.exit_code != null ? ` with code ${s.exit_code}` : ""}`, s.error, peek && peek.lastLine]
          .filter(Boolean).join(" — ");
      } else if (this.message) line = `🔔 ${this.message}`;
      else line = (s.title || "").trim() || (peek && peek.lastLine) || "";
      this.lineEl.textContent = line;
      this.lineEl.hidden = !line;
      if (this.optionsEl.childElementCount) {
        this.optionsEl.replaceChildren();
        this.choices = [];
        this.choicesKey = "";
      }
    }
  }

  renderChoices() {
    const p = this.prompt;
    const key = JSON.stringify(p ? [p.kind, p.options] : null);
    if (key === this.choicesKey && this.optionsEl.childElementCount) return;
    this.choicesKey = key;
    this.choices = answerChoices(p);
    const buttons = this.choices.map((c) => el("button", {
      type: "button", class: `option${c.selected ? " selected" : ""}`, title: c.label,
      "aria-keyshortcuts": c.key || null,
      dataset: c.answer.option != null ? { option: String(c.answer.option) } : {},
      onclick: () => this.ask(c),
    }, c.numbered || !c.key ? null : el("kbd", { class: "key-hint", "aria-hidden": "true" }, c.key), c.label));
    if (p && this.session.kind !== "acp") { // an ACP permission is answered with one of its options only
      buttons.push(el("button", { type: "button", class: "option option-esc", title: "Press Esc (usually: cancel)",
        onclick: () => this.ask({ label: "Esc", answer: { keys: ESC_KEY } }) }, "Esc"));
    }
    const peek = this.peek;
    const read = Boolean(this.session.prompt) || Boolean(peek && peek.state === "blocked");
    const note = !read ? "Reading the prompt…"
      : !p ? "Open it to answer in its terminal."
        : p.kind === "password" ? "A password prompt: open it to answer." : "";
    if (note) buttons.push(el("span", { class: "row-note" }, note));
    const hadFocus = this.optionsEl.contains(document.activeElement);
    this.optionsEl.replaceChildren(...buttons);
    if (hadFocus) this.openButton.focus({ preventScroll: true });
    for (const b of this.optionsEl.querySelectorAll("button")) b.disabled = this.busy;
    if (this.pending && !this.choices.some((c) => JSON.stringify(c.answer) === JSON.stringify(this.pending.answer))
        && this.pending.label !== "Esc") this.cancel();
  }

  /** The answer with this digit (its number in a numbered menu, else its place), to confirm. */
  choose(digit) {
    const choice = this.choices.find((c) => c.key === digit);
    if (!choice || this.session.state !== "blocked") return false;
    this.ask(choice);
    return true;
  }

  describe(choice) {
    this.confirmText.textContent = `Send ${choice.label} to ${this.session.name || this.id}?`;
  }

  restingFocus() {
    return this.openButton;
  }

  async confirm() {
    const choice = this.pending;
    if (!choice || this.busy) return;
    this.cancel();
    this.openButton.focus({ preventScroll: true });
    await this.sendAnswer(choice);
  }

  setBusy(busy) {
    this.busy = busy;
    this.el.toggleAttribute("aria-busy", busy);
    for (const b of this.optionsEl.querySelectorAll("button")) b.disabled = busy;
  }

  tick() {
    const since = this.session.since;
    this.timeEl.textContent = since ? formatDuration(this.ctx.serverNow() - since) : "";
  }

  setSelected(selected, open) {
    this.el.classList.toggle("selected", selected);
    if (selected) this.el.setAttribute("aria-current", "true");
    else this.el.removeAttribute("aria-current");
    this.openButton.setAttribute("aria-expanded", String(selected && open));
  }

  focus() {
    this.openButton.focus({ preventScroll: false });
    this.el.scrollIntoView({ block: "nearest" });
  }

  destroy() {
    this.stopResult();
    this.el.remove();
  }
}
