// The ledger: every decision that touched a pane (answers, keys into a prompt, sends, resumes,
// creates, deletes, refusals, the policy's), who made it and what they were shown. Read from
// GET /api/ledger a page at a time (newest last; "Older" reads the page before). Text only:
// every value the server gives is set as textContent, never parsed as HTML. An owner also picks
// a person (the users' list is owners' only): every device of theirs; the Actor field takes a
// person's name or one actor's id (a device, the token, a rule).

import { api } from "./api.js";
import { el as h } from "./dom.js";
import { roleKnown } from "./people.js";

/** What a row says in one line: "answer option 1 — took", "send — refused: the pane is blocked". */
export function outcome(e) {
  const what = e.option != null ? `option ${e.option}` : e.keys != null ? JSON.stringify(e.keys) : e.detail || "";
  if (e.refused) return `${what} — refused: ${e.refused}`;
  if (e.took === true) return `${what} — took`;
  if (e.took === false) return `${what} — did not take`;
  return what;
}

/** The request as the actor was shown it, in one line ("Bash: ls -la"). */
export function asked(request) {
  if (!request) return "";
  const head = request.tool ? `${request.tool}: ` : "";
  return head + (request.subject || request.question || "");
}

export class LedgerView {
  /** @param {HTMLDialogElement} dialog the (empty) dialog the view draws itself into */
  constructor(dialog) {
    this.dialog = dialog;
    this.session = h("input", { type: "text", name: "session", autocomplete: "off", spellcheck: "false",
      placeholder: "every session" });
    this.actor = h("input", { type: "text", name: "actor", autocomplete: "off", spellcheck: "false",
      placeholder: "a person, or a device's id" });
    this.person = h("select", { name: "user", class: "needs-owner", onchange: () => this.load() },
      h("option", { value: "" }, "everyone"));
    this.status = h("p", { class: "ledger-status", role: "status", "aria-live": "polite" });
    this.list = h("ol", { class: "ledger-rows", "aria-label": "Decisions, newest last" });
    this.older = h("button", { type: "button", class: "secondary", hidden: true, onclick: () => this.load(this.next) },
      "Older");
    const form = h("form", { class: "ledger-filter", onsubmit: (ev) => { ev.preventDefault(); this.load(); } },
      h("label", {}, "Session ", this.session), h("label", { class: "needs-owner" }, "Person ", this.person),
      h("label", {}, "Actor ", this.actor),
      h("button", { type: "submit", class: "primary" }, "Show"));
    const close = h("form", { method: "dialog" }, h("button", { type: "submit" }, "Close"));
    dialog.replaceChildren(h("h2", { id: "ledger-title" }, "Ledger"), form, this.older, this.list, this.status, close);
    this.next = null;
    this.loads = 0;
  }

  /** Open on every decision, or on one session's (its view), one person's or one actor's. */
  async open({ session = "", actor = "", user = "" } = {}) {
    this.session.value = session;
    this.actor.value = actor;
    if (!this.dialog.open) this.dialog.showModal();
    await this.people(user);
    return this.load();
  }

  /** The person picker's users (owners only: anyone else keeps the Actor field). */
  async people(chosen) {
    if ((await roleKnown()) !== "owner") return;
    let found;
    try {
      found = await api.users();
    } catch {
      return; // the Actor field still takes a person's name
    }
    const names = found.users.map((u) => u.name);
    if (chosen && !names.includes(chosen)) names.push(chosen);
    this.person.replaceChildren(h("option", { value: "" }, "everyone"),
      ...names.map((n) => h("option", { value: n }, n)));
    this.person.value = chosen;
  }

  /** A page: the newest rows (``before`` null), or the page before ``before``, put on top. */
  async load(before = null) {
    const params = {};
    if (this.session.value.trim()) params.session = this.session.value.trim();
    if (this.actor.value.trim()) params.actor = this.actor.value.trim();
    if (this.person.value) params.user = this.person.value;
    if (before != null) params.before = before;
    this.status.textContent = "Loading…";
    const ticket = ++this.loads; // a filter changed while a page was on its way: only the newest counts
    let page;
    try {
      page = await api.ledger(params);
    } catch (err) {
      if (ticket === this.loads) this.status.textContent = `Could not read the ledger: ${err.message}`;
      return;
    }
    if (ticket !== this.loads) return;
    const rows = page.entries.map((e) => this.row(e));
    if (before == null) this.list.replaceChildren(...rows);
    else this.list.prepend(...rows);
    this.next = page.next;
    this.older.hidden = page.next == null;
    this.status.textContent = this.list.children.length ? `${this.list.children.length} decisions` : "No decisions yet.";
  }

  row(e) {
    const when = new Date(e.at * 1000).toLocaleString();
    const who = `${e.actor.kind} ${e.actor.name}${e.actor.user ? ` of ${e.actor.user}` : ""}`;
    const line = h("p", { class: "ledger-line" },
      h("time", { datetime: new Date(e.at * 1000).toISOString() }, when), " ",
      h("strong", {}, e.action), " ", outcome(e), " · ", h("span", { class: "ledger-who" }, who),
      " · ", h("span", { class: "ledger-session" }, `${e.session}${e.agent ? ` (${e.agent})` : ""}`));
    const item = h("li", { class: e.refused ? "ledger-row refused" : "ledger-row", "data-seq": String(e.seq) }, line);
    const request = asked(e.request);
    if (request) item.append(h("p", { class: "ledger-request" }, `asked: ${request}`));
    if (e.reason) item.append(h("p", { class: "ledger-request" }, `rule ${e.rule || "none"}: ${e.reason}`));
    if (e.screen && e.screen.length) {
      item.append(h("details", {}, h("summary", {}, "the screen they saw"), h("pre", {}, e.screen.join("\n"))));
    }
    return item;
  }
}
