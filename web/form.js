// The new-session form: an agent from GET /api/agents, an optional command (space-separated
// words or a JSON argv), a folder, a name and environment variables. A command that could not
// start, or exited at once with an error, is reported at the form as a failure with its exit
// code and first lines of output, and its dead session is removed (a message, not a card).

const EARLY_EXIT_MS = 1500;

import { api } from "./api.js";
import { parseCommand, parseEnv } from "./parse.js";

export class NewSessionForm {
  /** @param {object} on {onCreated(session), onStarted(session), beforeRemove(id), onFailed(id)} */
  constructor(form, on) {
    this.form = form;
    this.on = on;
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

  /** The session's record if it exited within EARLY_EXIT_MS of starting, else null. */
  async earlyExit(session) {
    const done = (s) => s.state === "exited" || s.exit_code != null;
    if (done(session)) return session;
    const until = Date.now() + EARLY_EXIT_MS;
    while (Date.now() < until) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      try {
        const now = await api.session(session.id);
        if (done(now)) return now;
      } catch {
        return null; // deleted meanwhile, or the server went away: the card tells
      }
    }
    return null;
  }

  async firstLines(id) {
    try {
      const { rows = [] } = await api.screen(id);
      return rows.filter((r) => r.trim()).slice(0, 3).join("\n");
    } catch {
      return "";
    }
  }

  /** A start that failed leaves no dead session behind: the form says what happened. */
  async removeFailed(id) {
    await this.on.beforeRemove(id);
    try {
      await api.remove(id);
    } catch (err) {
      if (err.status !== 404) return false;
    }
    this.on.onFailed(id);
    return true;
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
    let env;
    try {
      env = parseEnv(f.env.value);
    } catch (err) {
      this.say(err.message, "error");
      f.env.focus();
      return;
    }
    const spec = {};
    if (Object.keys(env).length) spec.env = env;
    if (f.agent.value) spec.agent = f.agent.value;
    if (command) spec.command = command;
    if (f.cwd.value.trim()) spec.cwd = f.cwd.value.trim();
    const branch = f.branch.value.trim();
    if (branch) {
      if (!spec.cwd) {
        this.say("A worktree needs the folder of its git repository.", "error");
        f.cwd.focus();
        return;
      }
      spec.worktree = { repo: spec.cwd, branch };
      delete spec.cwd;
    }
    if (f.name.value.trim()) spec.name = f.name.value.trim();
    if (!spec.agent && !spec.command) {
      this.say("Choose an agent or give a command.", "error");
      return;
    }
    this.submit.disabled = true;
    this.say("Starting…", "pending");
    try {
      const session = await api.create(spec);
      this.on.onCreated(session);
      f.name.value = "";
      f.branch.value = "";
      this.say(`Starting ${session.name} (${session.id})…`, "pending");
      const ended = await this.earlyExit(session);
      if (ended && ended.exit_code !== 0) {
        const lines = await this.firstLines(session.id);
        const removed = await this.removeFailed(session.id);
        this.say(`Failed: ${session.name} ${ended.error ? `could not start (${ended.error})` : "exited at once"}`
          + ` — exit code ${ended.exit_code ?? "unknown"}.${lines ? `\n${lines}` : ""}`
          + (removed ? "" : "\n(Its session could not be removed: remove it from the list.)"), "error");
        this.status.scrollIntoView({ block: "nearest" });
      } else if (ended) {
        this.say(`Started ${session.name} (${session.id}); it has already finished (exit code 0).`, "ok");
        this.on.onStarted(session);
      } else {
        this.say(`Started ${session.name} (${session.id}).`, "ok");
        this.on.onStarted(session);
      }
    } catch (err) {
      this.say(`Not started: ${err.message}`, "error");
    } finally {
      this.submit.disabled = false;
      // disabled while it worked, the button lost the keyboard to the page: give it back
      if (document.activeElement === document.body || document.activeElement === null) this.submit.focus();
    }
  }
}
