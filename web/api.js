// The service's HTTP API. The login cookie (set by /?token=…) authorises every request.

import { describeDetail } from "./parse.js";

/** A 403 that names a missing role or a restricted session, not a wrong credential. */
const ROLE_REFUSAL = /^needs role |is restricted to named users/;

export class ApiError extends Error {
  constructor(status, detail, body) {
    super(describeDetail(detail) || `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

const authListeners = new Set();

/** Call `fn(status)` when a request is refused for want of a valid login (401/403). */
export function onAuthFailure(fn) {
  authListeners.add(fn);
}

async function request(method, path, body) {
  const init = { method, headers: { Accept: "application/json" }, credentials: "same-origin", cache: "no-store" };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    throw new ApiError(0, `the server is unreachable (${err.message})`, null);
  }
  let data = null;
  const text = await response.text();
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = { detail: text.slice(0, 200) };
    }
  }
  // a refusal for the role (or a session restricted to others) is no lost login
  if (response.status === 401 || (response.status === 403 && !ROLE_REFUSAL.test((data && data.detail) || ""))) {
    for (const fn of authListeners) fn(response.status);
  }
  if (!response.ok) throw new ApiError(response.status, data && data.detail, data);
  return data;
}

export const api = {
  agents: () => request("GET", "/api/agents"),
  sessions: () => request("GET", "/api/sessions"),
  create: (spec) => request("POST", "/api/sessions", spec),
  /** `discard`: the user confirmed losing a worktree's uncommitted changes (else a 409 lists them). */
  remove: (id, discard = false) =>
    request("DELETE", `/api/sessions/${encodeURIComponent(id)}${discard ? "?discard=true" : ""}`),
  /** A worktree session's branch against its base: counts, files, the bounded diff. */
  changes: (id) => request("GET", `/api/sessions/${encodeURIComponent(id)}/changes`),
  send: (id, text, enter = true) => request("POST", `/api/sessions/${encodeURIComponent(id)}/send`, { text, enter }),
  screen: (id) => request("GET", `/api/sessions/${encodeURIComponent(id)}/screen`),
  session: (id) => request("GET", `/api/sessions/${encodeURIComponent(id)}`),
  /** A lost session's agent started again on its conversation (its manifest's resume command). */
  resume: (id) => request("POST", `/api/sessions/${encodeURIComponent(id)}/resume`),
  /** A new name for the session (PATCH; the server answers with the session's record). */
  rename: (id, name) => request("PATCH", `/api/sessions/${encodeURIComponent(id)}`, { name }),
  /** Revoke this browser's login (the cookie stops working here and anywhere it leaked). */
  logout: () => request("POST", "/logout"),
  /** `answer` is {option: N} or {keys: "…"}; the user confirmed it in the page. */
  /** A page of the ledger: {entries, next}; `params` filters (session, user, actor: a person or an actor's id, since) and pages (before, limit). */
  ledger: (params = {}) => request("GET", `/api/ledger?${new URLSearchParams(params)}`),
  /** The approval policy in force: {file, paused, error, rules, decisions}; its kill switch. */
  policy: () => request("GET", "/api/policy"),
  pausePolicy: () => request("POST", "/api/policy/pause"),
  resumePolicy: () => request("POST", "/api/policy/resume"),
  answer: (id, answer) =>
    request("POST", `/api/sessions/${encodeURIComponent(id)}/answer`, { ...answer, confirm: true }),
  /** Who this page is: {kind, id, name, user, role}. */
  me: () => request("GET", "/api/me"),
  /** Owners: {users: [{name, role, created, devices: [{id, name, revoked, …}]}]}. */
  users: () => request("GET", "/api/users"),
  addUser: (name, role) => request("POST", "/api/users", { name, role }),
  setRole: (name, role) => request("PATCH", `/api/users/${encodeURIComponent(name)}`, { role }),
  /** Forget a user and revoke its devices: {removed, revoked}; a 409 for your own user. */
  removeUser: (name) => request("DELETE", `/api/users/${encodeURIComponent(name)}`),
  /** Restrict a session to these users ([]: open to everyone): {session, users}. */
  restrict: (id, users) => request("PUT", `/api/sessions/${encodeURIComponent(id)}/users`, { users }),
};

/**
 * Why a WebSocket could not be opened. Browsers hide the HTTP status of a refused
 * handshake (the close code is 1006), so ask the HTTP API, which uses the same cookie:
 * "auth" (401/403: log in again), "down" (unreachable) or "other".
 */
export async function probe() {
  try {
    const response = await fetch("/api/sessions", { credentials: "same-origin", cache: "no-store" });
    if (response.status === 401 || response.status === 403) return "auth";
    return "other";
  } catch {
    return "down";
  }
}
