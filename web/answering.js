// What a queue row and a card share about answering a blocked pane: the inline confirmation
// (nothing is sent before the user confirms), sending the answer, and the result line that says
// whether it took. One copy, so the two views cannot drift apart on what a confirmation means.

import { api } from "./api.js";
import { el } from "./dom.js";
import { answerOutcome } from "./parse.js";

export const ESC_KEY = "\u001b";
const RESULT_FADE_MS = 8000;
const RESULT_CLEAR_MS = 11000;

/**
 * A view that sends answers after an inline confirmation. Its subclass keeps `session`, `id`,
 * `ctx`, `pending` and `busy`, puts `confirmEl` and `resultEl` (made by `buildConfirm` and
 * `buildResult`) in its DOM, and defines `describe(action)` (the question's words),
 * `restingFocus()` (where focus goes when the question goes) and `setBusy(busy)`.
 */
export class Answering {
  /** The Confirm / Cancel group; Escape in it cancels (and goes no further: not the large view's). */
  buildConfirm(label) {
    this.confirmText = el("span", { class: "confirm-text" });
    this.confirmButton = el("button", { type: "button", class: "confirm-yes primary", onclick: () => this.confirm() },
      "Confirm");
    this.cancelButton = el("button", { type: "button", class: "confirm-no", onclick: () => this.cancel(true) }, "Cancel");
    this.confirmEl = el("div", { class: "confirm", hidden: true, role: "group", "aria-label": label },
      this.confirmText, this.confirmButton, this.cancelButton);
    this.confirmEl.addEventListener("keydown", (e) => {
      if (e.key !== "Escape") return;
      e.preventDefault();
      e.stopPropagation();
      this.cancel(true);
    });
  }

  buildResult() {
    this.resultEl = el("p", { class: "result", role: "status", "aria-live": "polite" });
  }

  /** Ask to confirm `action` (remembering where focus was, to give it back on Cancel). */
  ask(action) {
    if (this.busy) return;
    if (!this.pending) this.returnFocus = document.activeElement;
    this.pending = action;
    this.describe(action);
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
        ? this.returnFocus : this.restingFocus();
      back.focus({ preventScroll: true });
    }
    this.returnFocus = null;
  }

  /** Send a confirmed answer and say in the result line whether it took. */
  async sendAnswer(action) {
    this.setBusy(true);
    this.showResult(`Sending ${action.label}…`, "pending");
    this.ctx.onAnswered?.(this);
    try {
      const r = await api.answer(this.id, action.answer);
      this.showResult(...answerOutcome(r, action.label));
    } catch (err) {
      this.showResult(err.status === 409 ? `Not sent: ${err.message}` : `Failed: ${err.message}`,
        err.status === 409 ? "warn" : "error");
    } finally {
      this.setBusy(false);
    }
  }

  /** A result line; final ones fade after a while and then go. */
  showResult(text, kind) {
    this.stopResult();
    this.resultEl.classList.remove("fading");
    this.resultEl.textContent = text;
    this.resultEl.dataset.kind = kind;
    if (kind === "pending" || !text) return;
    this.fadeTimer = setTimeout(() => this.resultEl.classList.add("fading"), RESULT_FADE_MS);
    this.clearTimer = setTimeout(() => {
      this.resultEl.textContent = "";
      this.resultEl.classList.remove("fading");
    }, RESULT_CLEAR_MS);
  }

  stopResult() {
    clearTimeout(this.fadeTimer);
    clearTimeout(this.clearTimer);
  }
}
