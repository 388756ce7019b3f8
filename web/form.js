// The new-session form: an agent from GET /api/agents, an optional command (space-separated
// words or a JSON argv), a folder and a name.

import { api } from "./api.js";
import { parseCommand } from "./parse.js";

export class NewSessionForm {
  constructor(form, onCreated) {
    this.form = form;
    this.onCreated = onCreated;
    this.agent = form.elements.agent;
    this.status = form.querySelector(".form-status");
    this.warnings = form.querySelector(".form-warnings");
    this.submit = form.querySelector("button[type=submit]");
    this.loaded = false;
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      this.create();
    });
  }

  async loadAgents() {
    try {
      const { agents = [], errors = [] } = await api.agents();
      const current = this.agent.value;
      const none = new Option("(none: the command only)", "");
      const opts = agents.map((a) => {
        const o = new Option(a.description ? `${a.agent} — ${a.description}` : a.agent, a.agent);
        o.title = a.command ? `default command: ${a.command.join(" ")}` : "no default command";
        return o;
      });
      this.agent.replaceChildren(...opts, none);
      this.agent.value = current && [...this.agent.options].some((o) => o.value === current)
        ? current
        : agents.some((a) => a.agent === "claude") ? "claude" : (agents[0]?.agent ?? "");
      this.warnings.replaceChildren(...errors.map((e) => {
        const li = document.createElement("li");
        li.textContent = typeof e === "string" ? `manifest refused: ${e}`
          : `manifest refused: ${e.file}${e.line ? `:${e.line}` : ""}${e.rule ? ` rule ${e.rule}` : ""}: ${e.reason}`;
        return li;
      }));
      this.warnings.hidden = errors.length === 0;
      this.loaded = true;
    } catch (err) {
      this.say(`Could not load the agents: ${err.message}`, "error");
    }
  }

  say(text, kind) {
    this.status.textContent = text;
    this.status.dataset.kind = kind;
  }

  async create() {
    const f = this.form.elements;
    let command;
    try {
      command = parseCommand(f.command.value);
    } catch (err) {
      this.say(err.message, "error");
      f.command.focus();
      return;
    }
    const spec = {};
    if (f.agent.value) spec.agent = f.agent.value;
    if (command) spec.command = command;
    if (f.cwd.value.trim()) spec.cwd = f.cwd.value.trim();
    if (f.name.value.trim()) spec.name = f.name.value.trim();
    if (!spec.agent && !spec.command) {
      this.say("Choose an agent or give a command.", "error");
      return;
    }
    this.submit.disabled = true;
    this.say("Starting…", "pending");
    try {
      const session = await api.create(spec);
      this.say(`Started ${session.name} (${session.id}).`, "ok");
      f.name.value = "";
      this.onCreated(session);
    } catch (err) {
      this.say(`Not started: ${err.message}`, "error");
    } finally {
      this.submit.disabled = false;
    }
  }
}
