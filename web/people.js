// People and roles: who this page is (GET /api/me: its role goes on <body data-role>, and the
// stylesheet hides what that role may not do: a viewer sees no answer buttons, send box or
// session tools, only an owner sees People, pairing and devices), and the People view for
// owners: users, their devices and roles, a role changed in place, a user added or removed
// (after an inline confirmation; the server's refusal is shown as it gives it), and every
// session with who sees it: restricted to chosen users, or the restriction lifted. Every value
// the server gives is set as text, never parsed as HTML.

import { api } from "./api.js";
import { el as h } from "./dom.js";
import { TermView } from "./term.js";

export const ROLES = ["viewer", "operator", "owner"];

/** Who this page is ({kind, id, name, user, role}; null before the server said). */
let whoami = null;

/** The page's latest question about its role (null before the first). */
let asking = null;

/** Ask the server who this page is and mark the page with its role; the role ("owner" when
 * the server cannot say: its refusals still hold). */
export function applyRole() {
  asking = (async () => {
    let role = "owner";
    try {
      whoami = await api.me();
      role = whoami.role;
    } catch {
      // an old server without /api/me: every credential was an owner there
    }
    document.body.dataset.role = role;
    TermView.readOnly = role === "viewer"; // a viewer's terminal is for watching: no key is sent
    return role;
  })();
  return asking;
}

/** This page's role, once the server said it (a view opened while the page loads waits for it). */
export function roleKnown() {
  return asking ?? applyRole();
}

export class PeopleView {
  /** @param {HTMLDialogElement} dialog the (empty) dialog the view draws itself into
   * @param {{sessions?: () => Array<{id: string, name?: string, agent?: string}>}} ctx the page's sessions */
  constructor(dialog, { sessions = () => [] } = {}) {
    this.dialog = dialog;
    this.sessions = sessions;
    this.users = [];
    this.restricted = {}; // session id -> the users it is restricted to
    this.access = h("ul", { class: "access-list", "aria-labelledby": "access-title" });
    this.status = h("p", { class: "people-status", role: "status", "aria-live": "polite" });
    this.list = h("ul", { class: "people", "aria-label": "Users" });
    this.name = h("input", { type: "text", name: "name", autocomplete: "off", spellcheck: "false",
      placeholder: "name (a-z 0-9 . _ -)", "aria-label": "New user's name", required: true });
    this.role = roleSelect("viewer", "New user's role");
    const add = h("form", { class: "people-add", onsubmit: (ev) => { ev.preventDefault(); this.add(); } },
      this.name, this.role, h("button", { type: "submit" }, "Add user"));
    const close = h("form", { method: "dialog" }, h("button", { type: "submit" }, "Close"));
    dialog.replaceChildren(h("h2", { id: "people-title" }, "People"), this.list, add, this.status,
      h("h3", { id: "access-title" }, "Who sees each session"),
      h("p", { class: "access-hint" }, "Everyone sees a session unless it is restricted to named users; "
        + "owners always see every session."),
      this.access, close);
  }

  /** Open on every user and session; ``session``: that session's choice of users opened (a card's
   * "Who sees it"). */
  async open({ session = null } = {}) {
    if (!this.dialog.open) this.dialog.showModal();
    await this.load();
    const row = session && [...this.access.children].find((li) => li.dataset.session === session);
    if (!row) return;
    row.scrollIntoView({ block: "nearest" });
    const toggle = row.querySelector(".access-toggle");
    if (toggle.getAttribute("aria-expanded") !== "true") toggle.click();
  }

  async load() {
    let found;
    try {
      found = await api.users();
    } catch (err) {
      this.status.textContent = `Could not read the users: ${err.message}`;
      return;
    }
    this.users = found.users;
    this.restricted = found.restricted || {};
    this.list.replaceChildren(...found.users.map((u) => this.row(u)));
    this.drawAccess();
    this.status.textContent = found.users.length ? `${found.users.length} users` : "No users yet: pair a device.";
  }

  row(user) {
    const select = roleSelect(user.role, `Role of ${user.name}`);
    select.addEventListener("change", async () => {
      try {
        await api.setRole(user.name, select.value);
        this.status.textContent = `${user.name} is ${select.value} now.`;
      } catch (err) {
        select.value = user.role;
        this.status.textContent = `Role not changed: ${err.message}`;
        return;
      }
      user.role = select.value;
    });
    const devices = user.devices.length
      ? user.devices.map((d) => `${d.name}${d.revoked ? " (revoked)" : ""}`).join(", ")
      : "no devices";
    const item = h("li", { class: "person", dataset: { user: user.name } },
      h("strong", { class: "person-name" }, user.name), whoami && whoami.user === user.name ? " (you) " : " ", select,
      h("span", { class: "person-devices" }, ` · ${devices}`), " ");
    const live = user.devices.filter((d) => !d.revoked).length;
    const remove = h("button", { type: "button", class: "remove-user danger", "aria-label": `Remove ${user.name}`,
      onclick: () => { confirm.hidden = false; yes.focus(); } }, "Remove");
    const yes = h("button", { type: "button", class: "confirm-yes danger", onclick: () => this.remove(user.name, remove) },
      `Remove ${user.name}`);
    const no = h("button", { type: "button", class: "confirm-no",
      onclick: () => { confirm.hidden = true; remove.focus(); } }, "Cancel");
    const confirm = h("p", { class: "person-confirm", role: "group", "aria-label": `Remove ${user.name}?`, hidden: true },
      `Remove ${user.name}? ${live === 1 ? "Its device is" : `Its ${live} devices are`} revoked at once. `, yes, " ", no);
    item.append(remove, confirm);
    return item;
  }

  /** Remove a user (its devices revoked); a refusal is shown as the server words it. */
  async remove(name, button) {
    let done;
    try {
      done = await api.removeUser(name);
    } catch (err) {
      await this.load();
      this.status.textContent = `${name} not removed: ${err.message}`;
      this.focusRemove(name, button);
      return;
    }
    await this.load();
    this.status.textContent = `Removed ${name}; revoked ${done.revoked.length} devices.`;
    this.name.focus(); // its row is gone: the next thing an owner may do is add one
  }

  focusRemove(name, fallback) {
    const again = [...this.list.querySelectorAll(".person")].find((li) => li.dataset.user === name);
    (again ? again.querySelector(".remove-user") : fallback).focus();
  }

  // -- who sees each session ------------------------------------------------------------------
  drawAccess() {
    const all = [...this.sessions()].sort((a, b) => label(a).localeCompare(label(b)));
    if (!all.length) {
      this.access.replaceChildren(h("li", { class: "access-none" }, "No sessions."));
      return;
    }
    this.access.replaceChildren(...all.map((s) => this.accessRow(s)));
  }

  accessRow(session) {
    const names = this.restricted[session.id] || [];
    const pick = this.users.filter((u) => u.role !== "owner");
    const boxes = pick.map((u) => h("label", { class: "access-user" },
      h("input", { type: "checkbox", value: u.name, checked: names.includes(u.name) }), ` ${u.name} (${u.role})`));
    const panelId = `access-${session.id}`;
    const toggle = h("button", { type: "button", class: "access-toggle", "aria-expanded": "false", "aria-controls": panelId,
      "aria-label": `Who sees ${label(session)}`, onclick: () => show(panel.hidden) }, "Choose users");
    const save = h("button", { type: "button", class: "access-save primary",
      onclick: () => this.restrict(session, boxes.map((b) => b.firstChild).filter((c) => c.checked).map((c) => c.value)) },
    "Restrict to these");
    const open = h("button", { type: "button", class: "access-open", hidden: !names.length,
      onclick: () => this.restrict(session, [], false) }, "Open to everyone");
    const panel = h("fieldset", { class: "access-pick", id: panelId, hidden: true },
      h("legend", {}, `Only these users see ${label(session)} (and owners):`),
      ...(boxes.length ? boxes : [h("span", { class: "access-none" }, "No viewers or operators to choose: add one above.")]),
      " ", boxes.length ? save : null, " ", open);
    const show = (on) => {
      panel.hidden = !on;
      toggle.setAttribute("aria-expanded", String(on));
      if (on) (panel.querySelector("input") || open).focus();
    };
    return h("li", { class: "access", dataset: { session: session.id } },
      h("strong", {}, label(session)), " ",
      h("span", { class: "access-who" }, names.length ? `only ${names.join(", ")}` : "everyone"), " ", toggle, panel);
  }

  /** Restrict a session to ``names`` (chosen in its boxes); ``chosen`` false: open it to everyone. */
  async restrict(session, names, chosen = true) {
    if (chosen && !names.length) {
      this.status.textContent = `Choose at least one user for ${label(session)}, or leave it open.`;
      return;
    }
    let done;
    try {
      done = await api.restrict(session.id, names);
    } catch (err) {
      this.status.textContent = `${label(session)} not changed: ${err.message}`;
      return;
    }
    if (done.users.length) this.restricted[session.id] = done.users;
    else delete this.restricted[session.id];
    const row = [...this.access.children].find((li) => li.dataset.session === session.id);
    const fresh = this.accessRow(session);
    if (row) row.replaceWith(fresh);
    fresh.querySelector(".access-toggle").focus();
    this.status.textContent = done.users.length
      ? `${label(session)} is seen only by ${done.users.join(", ")} (and owners).`
      : `${label(session)} is open to everyone again.`;
  }

  async add() {
    const name = this.name.value.trim();
    if (!name) return;
    try {
      await api.addUser(name, this.role.value);
    } catch (err) {
      this.status.textContent = `Not added: ${err.message}`;
      return;
    }
    this.name.value = "";
    await this.load();
  }
}

/** A session as the view names it: its name, else its id. */
function label(session) {
  return session.name || session.id;
}

function roleSelect(value, label) {
  const select = h("select", { class: "role", "aria-label": label },
    ...ROLES.map((r) => h("option", { value: r }, r)));
  select.value = value;
  return select;
}
