// People and roles: who this page is (GET /api/me: its role goes on <body data-role>, and the
// stylesheet hides what that role may not do: a viewer sees no answer buttons, send box or
// session tools, only an owner sees People, pairing and devices), and the People view for
// owners: users, their devices and roles, a role changed in place, a user added. Every value
// the server gives is set as text, never parsed as HTML.

import { api } from "./api.js";
import { el as h } from "./dom.js";
import { TermView } from "./term.js";

export const ROLES = ["viewer", "operator", "owner"];

/** Ask the server who this page is and mark the page with its role; the role ("owner" when
 * the server cannot say: its refusals still hold). */
export async function applyRole() {
  let role = "owner";
  try {
    role = (await api.me()).role;
  } catch {
    // an old server without /api/me: every credential was an owner there
  }
  document.body.dataset.role = role;
  TermView.readOnly = role === "viewer"; // a viewer's terminal is for watching: no key is sent
  return role;
}

export class PeopleView {
  /** @param {HTMLDialogElement} dialog the (empty) dialog the view draws itself into */
  constructor(dialog) {
    this.dialog = dialog;
    this.status = h("p", { class: "people-status", role: "status", "aria-live": "polite" });
    this.list = h("ul", { class: "people", "aria-label": "Users" });
    this.name = h("input", { type: "text", name: "name", autocomplete: "off", spellcheck: "false",
      placeholder: "name (a-z 0-9 . _ -)", "aria-label": "New user's name", required: true });
    this.role = roleSelect("viewer", "New user's role");
    const add = h("form", { class: "people-add", onsubmit: (ev) => { ev.preventDefault(); this.add(); } },
      this.name, this.role, h("button", { type: "submit" }, "Add user"));
    const close = h("form", { method: "dialog" }, h("button", { type: "submit" }, "Close"));
    dialog.replaceChildren(h("h2", { id: "people-title" }, "People"), this.list, add, this.status, close);
  }

  open() {
    if (!this.dialog.open) this.dialog.showModal();
    return this.load();
  }

  async load() {
    let found;
    try {
      found = await api.users();
    } catch (err) {
      this.status.textContent = `Could not read the users: ${err.message}`;
      return;
    }
    this.list.replaceChildren(...found.users.map((u) => this.row(u)));
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
    return h("li", { class: "person", dataset: { user: user.name } },
      h("strong", { class: "person-name" }, user.name), " ", select,
      h("span", { class: "person-devices" }, ` · ${devices}`));
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

function roleSelect(value, label) {
  const select = h("select", { class: "role", "aria-label": label },
    ...ROLES.map((r) => h("option", { value: r }, r)));
  select.value = value;
  return select;
}
