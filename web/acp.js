// The conversation view of an ACP session's card: the messages, tool calls with their status,
// the plan, and the agent's permission request as one button per option (sent only after an
// inline confirmation), plus "Cancel turn". An ACP agent has no screen worth reading: this
// view replaces it, fed by /ws/sessions/{id}/conversation (the whole conversation, on change).

import { api } from "./api.js";
import { el } from "./dom.js";
import { LiveSocket } from "./live.js";

const STATUS_MARK = { pending: "…", in_progress: "▶", completed: "✓", failed: "✗" };
const PLAN_MARK = { pending: "○", in_progress: "◐", completed: "●" };

async function post(path, body) {
  const response = await fetch(path, {
    method: "POST", credentials: "same-origin", cache: "no-store",
    headers: { Accept: "application/json", "Content-Type": "application/json" },
    body: JSON.stringify(body || {}),
  });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    const err = new Error(typeof data.detail === "string" ? data.detail : `HTTP ${response.status}`);
    err.status = response.status;
    throw err;
  }
  return data;
}

/** The view's styles, linked once (they live beside this module, not in the shared sheet). */
function linkStyles() {
  if (document.querySelector('link[data-acp-styles]')) return;
  document.head.append(el("link", { rel: "stylesheet", href: "/static/acp.css", dataset: { acpStyles: "1" } }));
}

/** True for a session of kind "acp" (its card shows this view instead of a screen). */
export function isAcp(session) {
  return Boolean(session && session.kind === "acp");
}

export class AcpView {
  /** @param card the dashboard card ({id, session, el}); the view is `this.el`. */
  constructor(card) {
    this.card = card;
    this.id = card.id;
    this.conv = null;
    this.permKey = "";
    this.pending = null; // the option awaiting confirmation
    this.busy = false;
    linkStyles();
    this.build();
    this.socket = new LiveSocket(`/ws/sessions/${encodeURIComponent(this.id)}/conversation`, {
      onMessage: (msg) => { if (msg.type === "conversation") this.render(msg); },
      onDown: () => this.el.classList.add("acp-stale"),
      onUp: () => this.el.classList.remove("acp-stale"),
    }, { minDelay: 500, maxDelay: 10000, finalCodes: [4404] });
    this.socket.start();
  }

  build() {
    this.logEl = el("ol", { class: "acp-log", "aria-label": "Conversation", tabindex: "0" });
    this.planEl = el("section", { class: "acp-plan", hidden: true, "aria-label": "Plan" });
    this.optionsEl = el("div", { class: "options", role: "group", "aria-label": "Answer the permission request" });
    this.permTitle = el("p", { class: "acp-perm-title" });
    this.permDetail = el("pre", { class: "acp-perm-detail" });
    this.permEl = el("section", { class: "prompt acp-permission", hidden: true, "aria-label": "Permission request" },
      el("h3", {}, "Permission requested"), this.permTitle, this.permDetail, this.optionsEl);
    this.confirmText = el("span", { class: "confirm-text" });
    this.confirmButton = el("button", { type: "button", class: "confirm-yes primary", onclick: () => this.confirm() },
      "Confirm");
    this.confirmNo = el("button", { type: "button", class: "confirm-no", onclick: () => this.withdraw() }, "Cancel");
    this.confirmEl = el("div", { class: "confirm", hidden: true, role: "group", "aria-label": "Confirm the answer" },
      this.confirmText, this.confirmButton, this.confirmNo);
    this.cancelTurn = el("button", { type: "button", class: "acp-cancel", hidden: true,
      onclick: () => this.cancel() }, "Cancel turn");
    this.resultEl = el("p", { class: "result acp-result", role: "status", "aria-live": "polite" });
    this.el = el("section", { class: "acp", "aria-label": "ACP conversation" },
      this.permEl, this.confirmEl, this.resultEl, this.logEl, this.planEl, this.cancelTurn);
  }

  /** The session's record changed (state, why): show or hide what depends on it. */
  update(session) {
    const state = session.state;
    this.cancelTurn.hidden = !(state === "working" || state === "blocked");
    if (state !== "blocked" && this.pending) this.withdraw();
  }

  render(conv) {
    this.conv = conv;
    const log = this.logEl;
    const stick = log.scrollHeight - log.scrollTop - log.clientHeight < 8;
    log.replaceChildren(...(conv.dropped ? [el("li", { class: "acp-note" }, `(${conv.dropped} earlier entries)`)] : []),
      ...conv.entries.map((e) => this.entry(e)));
    if (stick) log.scrollTop = log.scrollHeight;
    this.planEl.hidden = !conv.plan.length;
    this.planEl.replaceChildren(el("h3", {}, "Plan"), el("ol", {}, ...conv.plan.map((p) =>
      el("li", { class: `acp-plan-${p.status}`, dataset: { status: p.status } },
        el("span", { class: "acp-mark", "aria-hidden": "true" }, PLAN_MARK[p.status] || "?"), " ", p.content,
        el("span", { class: "sr-only" }, ` (${p.status})`)))));
    this.renderPermission(conv.permission);
  }

  entry(e) {
    if (e.kind === "tool") {
      return el("li", { class: `acp-tool acp-tool-${e.status}`, dataset: { status: e.status || "" } },
        el("span", { class: "acp-mark", "aria-hidden": "true" }, STATUS_MARK[e.status] || "?"), " ",
        el("span", { class: "acp-tool-title" }, e.title || "tool call"),
        el("span", { class: "acp-tool-status" }, ` ${e.tool_kind || "tool"} · ${e.status || "?"}`),
        e.text ? el("pre", { class: "acp-tool-text" }, e.text) : null);
    }
    const label = { user: "You", agent: "Agent", thought: "Thinking", note: "" }[e.kind] ?? e.kind;
    return el("li", { class: `acp-${e.kind}` }, label ? el("span", { class: "acp-who" }, `${label}: `) : null,
      el("span", { class: "acp-text" }, e.text));
  }

  renderPermission(perm) {
    this.permEl.hidden = !perm;
    if (!perm) {
      this.permKey = "";
      if (this.pending) this.withdraw();
      return;
    }
    const key = `${perm.request}:${JSON.stringify(perm.options)}`;
    if (key === this.permKey) return; // keep focus and hover
    this.permKey = key;
    this.permTitle.textContent = `${perm.title} (${perm.tool_kind})`;
    this.permDetail.textContent = perm.detail || "";
    this.permDetail.hidden = !perm.detail;
    this.optionsEl.replaceChildren(...perm.options.map((o) => el("button", {
      type: "button", class: `option acp-option acp-${o.kind}`, dataset: { optionId: o.option_id, kind: o.kind },
      onclick: () => this.ask(perm, o),
    }, o.name)));
    if (this.pending && this.pending.request !== perm.request) this.withdraw();
  }

  ask(perm, option) {
    if (this.busy) return;
    this.pending = { request: perm.request, option };
    const name = this.card.session.name || this.id;
    this.confirmText.textContent = `Answer “${option.name}” to ${perm.title} in ${name}?`;
    this.confirmEl.hidden = false;
    this.confirmButton.focus();
  }

  withdraw() {
    this.pending = null;
    this.confirmEl.hidden = true;
  }

  setBusy(busy) {
    this.busy = busy;
    for (const b of this.optionsEl.querySelectorAll("button")) b.disabled = busy;
    this.cancelTurn.disabled = busy;
  }

  show(text, kind) {
    this.resultEl.textContent = text;
    this.resultEl.dataset.kind = kind;
  }

  async confirm() {
    const action = this.pending;
    if (!action || this.busy) return;
    this.withdraw();
    this.setBusy(true);
    this.show(`Sending “${action.option.name}”…`, "pending");
    try {
      const r = await api.answer(this.id, { option: action.option.option_id, request: action.request });
      this.show(`✓ Answered “${action.option.name}”; now ${r.state}.`, "ok");
    } catch (err) {
      this.show(err.status === 409 ? `Not sent: ${err.message}` : `Failed: ${err.message}`,
        err.status === 409 ? "warn" : "error");
    } finally {
      this.setBusy(false);
    }
  }

  async cancel() {
    this.setBusy(true);
    try {
      await post(`/api/sessions/${encodeURIComponent(this.id)}/cancel`, {});
      this.show("Cancel sent; the turn ends when the agent says so.", "ok");
    } catch (err) {
      this.show(err.status === 409 ? `Not cancelled: ${err.message}` : `Failed: ${err.message}`,
        err.status === 409 ? "warn" : "error");
    } finally {
      this.setBusy(false);
    }
  }

  destroy() {
    this.socket.stop();
    this.el.remove();
  }
}
