// What a blocked pane asks, shown on its row and its card: the server's `request` ({question,
// tool?, subject?, detail?, source, disagrees?}) when the session has one, else what the page can read
// itself: the dialog's lines above its answers (or the prompt's line), else the matched rule's
// `why`. Everything here came from a pane: it is set as text, never as HTML, and bounded.

import { clip } from "./parse.js";
import { policyNote } from "./policy.js";

const SOURCE_LABEL = { hook: "from the agent's hook", acp: "from the agent (ACP)", screen: "read from the screen" };

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text != null) node.textContent = text;
  return node;
}

/** The server's request, when it is a usable one (a question or a subject at least). */
export function requestOf(session, peek) {
  const r = (session && session.request) || (peek && peek.request) || null;
  if (!r || typeof r !== "object") return null;
  if (!r.question && !r.subject) return null;
  return r;
}

export class RequestView {
  constructor() {
    this.el = el("div", "request");
    this.key = "";
  }

  /**
   * @param {object} session the session's record (its `request`, `why`)
   * @param {object|null} peek what the page read of its screen: {request, excerpt}
   */
  update(session, peek) {
    const req = requestOf(session, peek);
    const excerpt = (peek && peek.excerpt) || [];
    const note = policyNote(session.policy);
    const key = JSON.stringify([req, req ? null : excerpt, session.why, note]);
    if (key === this.key) return;
    this.key = key;
    const parts = [];
    if (req) {
      this.el.dataset.source = String(req.source || "");
      if (req.question) parts.push(el("p", "req-question", clip(req.question, 300)));
      if (req.subject || req.tool) {
        const line = el("p", "req-subject-line");
        if (req.tool) line.append(el("span", "req-tool", clip(req.tool, 40)));
        if (req.subject) line.append(el("code", "req-subject", clip(req.subject, 500)));
        parts.push(line);
      }
      if (req.detail) parts.push(el("p", "req-detail", clip(req.detail, 600)));
      // the agent's own request and its screen name different things: both are worth reading
      if (req.disagrees) parts.push(el("p", "req-disagrees", `Check the terminal: ${clip(req.disagrees, 300)}`));
      this.el.title = SOURCE_LABEL[req.source] || "";
    } else if (excerpt.length) {
      this.el.dataset.source = "page";
      const block = el("p", "req-excerpt");
      block.textContent = excerpt.join("\n");
      parts.push(block);
      this.el.title = "read by the page from the screen";
    } else {
      this.el.dataset.source = "rule";
      parts.push(el("p", "req-why", session.why ? clip(session.why, 300) : "Waiting for an answer."));
      this.el.title = "";
    }
    if (note) {
      const said = el("p", "req-policy", note);
      said.title = clip(session.policy.reason || "", 300);
      parts.push(said);
    }
    this.el.replaceChildren(...parts);
  }

  /** The text a user reads as the request (the tests compare it). */
  get text() {
    return this.el.textContent;
  }
}
