// The Sessions dashboard: keeps a card per session from /ws/state (snapshot, then events),
// blocked ones first, and survives dropped sockets and server restarts.

import { Alerts, setBlockedCount } from "./alerts.js";
import { api, onAuthFailure } from "./api.js";
import { Card } from "./cards.js";
import { NewSessionForm } from "./form.js";
import { LiveSocket } from "./live.js";
import { cardOrder } from "./parse.js";

const $ = (id) => document.getElementById(id);
const els = {
  cards: $("cards"),
  empty: $("empty"),
  summary: $("summary"),
  connection: $("connection"),
  banner: $("banner"),
  backdrop: $("backdrop"),
  newToggle: $("new-toggle"),
  newForm: $("new-session"),
};

const sessions = new Map(); // id -> the API's session object
const cards = new Map(); // id -> Card
let skew = 0; // server clock minus ours, in seconds
let everUp = false;
let down = null; // {since, retryAt, reason} while /ws/state is down
let idsBeforeDrop = null;
let authLost = false;
let large = null; // the card shown large
let pinned = null; // {id, index}: a card just answered keeps its place until the user moves on

const serverNow = () => Date.now() / 1000 + skew;

const cardContext = {
  serverNow,
  onDeleted: (id) => { removeSession(id); layout(); },
  onLarge: (card, open) => {
    if (open && large && large !== card) large.setLarge(false);
    large = open ? card : large === card ? null : large;
    els.backdrop.hidden = !large;
    document.body.classList.toggle("has-large", Boolean(large));
    // a real modal: nothing behind it takes focus or clicks
    for (const el of [document.querySelector("header.top"), els.banner, $("last-alert-line"), els.newForm,
      els.empty, ...[...cards.values()].filter((c) => c !== large).map((c) => c.el)]) {
      if (el) el.inert = Boolean(large);
    }
  },
  onAnswered: (card) => {
    const index = [...els.cards.children].indexOf(card.el);
    if (index >= 0) pinned = { id: card.id, index };
  },
};

// the user moved on from an answered card: it may take its place in the order again
function unpin(e) {
  if (!pinned) return;
  const card = cards.get(pinned.id);
  if (!card || !card.el.contains(e.target)) {
    pinned = null;
    layout();
  }
}
document.addEventListener("pointerdown", unpin, true);
document.addEventListener("focusin", unpin, true);

// -- sessions and cards ---------------------------------------------------------------------
function upsert(session) {
  const merged = { ...(sessions.get(session.id) || {}), ...session };
  sessions.set(session.id, merged);
  const card = cards.get(session.id);
  if (card) card.update(merged);
  else cards.set(session.id, new Card(merged, cardContext));
}

function removeSession(id) {
  sessions.delete(id);
  alerts.forget(id);
  if (pinned && pinned.id === id) pinned = null;
  const card = cards.get(id);
  if (card) {
    cards.delete(id);
    if (large === card) cardContext.onLarge(card, false);
    card.destroy();
  }
}

function applySnapshot(list) {
  const ids = new Set(list.map((s) => s.id));
  for (const id of [...sessions.keys()]) if (!ids.has(id)) removeSession(id);
  for (const s of list) upsert(s);
  for (const card of cards.values()) card.resume();
  const before = idsBeforeDrop;
  idsBeforeDrop = null;
  if (before && before.size > 0 && ![...before].some((id) => ids.has(id))) {
    const gone = before.size === 1 ? "session is" : `${before.size} sessions are`;
    showBanner("info", `The server restarted: its earlier ${gone} gone.`, "Dismiss", hideBanner);
  } else if (!authLost) {
    hideBanner();
  }
}

/** Put the cards in order (blocked first) without losing the focus or a half-typed text. */
function layout() {
  const order = cardOrder([...sessions.values()]).filter((id) => cards.has(id));
  if (pinned && cards.has(pinned.id)) {
    if (sessions.get(pinned.id).state === "blocked") pinned = null; // asking again: first, as any blocked card
    else order.splice(Math.min(pinned.index, order.length - 1), 0, ...order.splice(order.indexOf(pinned.id), 1));
  }
  const container = els.cards;
  const current = [...container.children].map((el) => el.dataset.id);
  if (current.length !== order.length || current.some((id, i) => id !== order[i])) {
    // moving a node resets the scroll of what is inside it: keep each terminal's place
    const scrolls = new Map([...cards.values()].filter((c) => c.el.isConnected).map((c) => [c, c.saveScroll()]));
    const active = document.activeElement;
    const selection = active && typeof active.selectionStart === "number"
      ? [active.selectionStart, active.selectionEnd] : null;
    order.forEach((id, i) => {
      const el = cards.get(id).el;
      if (container.children[i] !== el) container.insertBefore(el, container.children[i] || null);
    });
    if (active && active !== document.activeElement && container.contains(active)) {
      active.focus({ preventScroll: true });
      if (selection) try { active.setSelectionRange(...selection); } catch { /* not a text field */ }
    }
    for (const [card, saved] of scrolls) card.restoreScroll(saved);
  }
  for (const card of cards.values()) card.mount();
  const all = [...sessions.values()];
  const count = (state) => all.filter((s) => s.state === state).length;
  const blocked = count("blocked");
  setBlockedCount(blocked);
  els.empty.hidden = all.length > 0 || !everUp;
  els.summary.textContent = all.length === 0 ? (everUp ? "No sessions" : "Connecting…")
    : [`${all.length} session${all.length === 1 ? "" : "s"}`,
      blocked ? `${blocked} blocked` : null,
      count("working") ? `${count("working")} working` : null,
      count("idle") ? `${count("idle")} idle` : null,
      count("exited") ? `${count("exited")} exited` : null].filter(Boolean).join(" · ");
}

// -- events from /ws/state -----------------------------------------------------------------
async function refresh(id) {
  try {
    const { sessions: list } = await api.sessions();
    const fresh = list.find((s) => s.id === id);
    if (fresh && sessions.has(id)) {
      upsert(fresh);
      layout();
    }
  } catch {
    // the next snapshot will tell
  }
}

function onMessage(msg) {
  switch (msg.type) {
    case "snapshot":
      if (typeof msg.at === "number") skew = msg.at - Date.now() / 1000;
      applySnapshot(msg.sessions || []);
      break;
    case "ping":
      if (typeof msg.at === "number") skew = msg.at - Date.now() / 1000;
      break;
    case "created":
      if (msg.session && msg.session.id) upsert(msg.session);
      break;
    case "deleted":
      removeSession(msg.session);
      break;
    case "state": {
      const s = sessions.get(msg.session);
      if (!s) break; // unknown yet: the next snapshot brings it
      upsert({ id: msg.session, state: msg.state, since: msg.at, source: msg.source, rule: msg.rule, why: msg.why });
      if (msg.state === "exited") refresh(msg.session); // exit code, error
      break;
    }
    case "notification":
      alerts.notify(msg);
      if (msg.kind === "desktop") alerts.showAgentMessage(msg);
      break;
    default:
      break;
  }
  layout();
}

// -- connection banner ---------------------------------------------------------------------
function showBanner(kind, text, actionLabel, action) {
  const b = els.banner;
  b.dataset.kind = kind;
  b.querySelector(".banner-text").textContent = text;
  const button = b.querySelector(".banner-action");
  button.hidden = !actionLabel;
  button.textContent = actionLabel || "";
  button.onclick = action || null;
  b.hidden = false;
}

function hideBanner() {
  els.banner.hidden = true;
  delete els.banner.dataset.kind;
}

function setConnection(status, text) {
  els.connection.dataset.status = status;
  els.connection.querySelector(".connection-text").textContent = text;
  document.body.classList.toggle("offline", status !== "live");
}

function renderDown() {
  if (!down) return;
  const wait = Math.max(0, Math.ceil((down.retryAt - Date.now()) / 1000));
  const what = down.reason === "dropped"
    ? "Lost the connection to the server (restarted?)"
    : "Cannot reach the server (restarted or stopped?)";
  showBanner("warn", `${what} — reconnecting${wait ? ` in ${wait}s` : ""}…`, "Retry now", () => state.retryNow());
}

const state = new LiveSocket("/ws/state", {
  onMessage,
  onUp() {
    everUp = true;
    down = null;
    authLost = false;
    setConnection("live", "live");
  },
  onDown({ delay, reason }) {
    if (!down) idsBeforeDrop = new Set(sessions.keys());
    down = { since: Date.now(), retryAt: Date.now() + delay, reason };
    setConnection("reconnecting", "reconnecting");
    renderDown();
  },
  onGiveUp() {
    loginLost();
  },
}, { staleMs: 40000, probeAuth: true });

function loginLost() {
  if (authLost) return;
  authLost = true;
  down = null;
  state.stop();
  for (const card of cards.values()) card.screenSocket.stop();
  setConnection("auth", "logged out");
  const text = "Log in again: the server no longer accepts this page's login (restarted with another token?). "
    + "Open the login URL that “panewatch serve” printed (…/?token=…), or retry.";
  showBanner("error", text, "Retry", () => {
    authLost = false;
    hideBanner();
    for (const card of cards.values()) card.screenSocket.start();
    state.start();
  });
}

onAuthFailure(() => loginLost());

// -- the page's controls -------------------------------------------------------------------
const alerts = new Alerts({
  notifyButton: $("notify"),
  notifySwitch: $("notify-switch"),
  notifyOn: $("notify-on"),
  soundToggle: $("sound"),
  lastAlert: $("last-alert"),
  lastAlertLine: $("last-alert-line"),
}, focusSession);

function focusSession(id) {
  const card = cards.get(id);
  if (!card) return;
  card.el.scrollIntoView({ behavior: "smooth", block: "center" });
  card.largeButton.focus({ preventScroll: true });
  card.el.classList.remove("flash");
  void card.el.offsetWidth; // restart the animation
  card.el.classList.add("flash");
}

$("last-alert").addEventListener("click", (e) => focusSession(e.currentTarget.dataset.session));
window.addEventListener("resize", () => {
  clearTimeout(window.__fitTimer);
  window.__fitTimer = setTimeout(() => large && large.fitToWindow(), 200);
});

const form = new NewSessionForm(els.newForm, (session) => {
  upsert(session); // the "created" event may come a moment later
  layout();
  focusSession(session.id);
});

els.newToggle.addEventListener("click", () => {
  const open = els.newForm.hidden;
  els.newForm.hidden = !open;
  els.newToggle.setAttribute("aria-expanded", String(open));
  if (open) {
    form.loadAgents();
    els.newForm.elements.agent.focus();
  }
});

els.backdrop.addEventListener("click", () => large && large.setLarge(false));
document.addEventListener("keydown", (e) => {
  // Esc in the terminal is a key for the pane (it interrupts Claude); elsewhere it closes
  if (e.key === "Escape" && large && !(e.target instanceof Element && e.target.closest(".xterm"))) {
    e.preventDefault();
    large.setLarge(false);
  }
});

setInterval(() => {
  for (const card of cards.values()) card.tick();
  renderDown();
}, 1000);

// For debugging from the console (and for the tests): drop every socket as a network would.
window.panewatch = {
  sessions,
  cards,
  state,
  dropConnections() {
    state.drop();
    for (const card of cards.values()) card.screenSocket.drop();
  },
};

setConnection("connecting", "connecting");
state.start();
form.loadAgents();
layout();
