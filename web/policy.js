// The approval policy on the page: its kill switch (pause / resume, shown only when the server runs
// one) and, on a blocked session, what a rule that did not act would have done ("The policy would
// allow this"), so a person answering knows a rule covers it — or why it did not act.

import { api } from "./api.js";

/** The note for a session's latest policy decision, or "" (no rule had anything to say). */
export function policyNote(decision) {
  if (!decision || !decision.would || !decision.rule) return "";
  return `The policy would ${decision.would} this (rule ${decision.rule}); you decide.`;
}

export class PolicySwitch {
  /** @param {HTMLButtonElement} button the kill switch, hidden until the server says it has a policy */
  constructor(button) {
    this.button = button;
    this.status = null;
    button.addEventListener("click", () => this.toggle());
  }

  async refresh() {
    try {
      this.status = await api.policy();
    } catch {
      this.status = null; // no policy endpoint answer: keep the switch out of the way
    }
    this.render();
  }

  render() {
    const s = this.status;
    this.button.hidden = !s || !s.file;
    if (!s) return;
    this.button.textContent = s.paused ? "Resume policy" : "Pause policy";
    this.button.setAttribute("aria-pressed", s.paused ? "true" : "false");
    this.button.title = s.paused
      ? "The approval policy is paused: every prompt waits for a person. Resume it."
      : `The approval policy (${s.file}, ${(s.rules || []).length} rules) answers what its rules allow or deny. Pause it: every prompt waits for a person.`;
  }

  async toggle() {
    if (!this.status) return;
    this.button.disabled = true;
    try {
      const next = this.status.paused ? await api.resumePolicy() : await api.pausePolicy();
      this.status = { ...this.status, ...next };
    } catch (err) {
      this.button.title = `Could not change the policy: ${err.message}`;
    } finally {
      this.button.disabled = false;
      this.render();
    }
  }
}
