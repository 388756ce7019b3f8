// The Sessions dashboard. Its first view is the attention queue: one compact row per session
// from /ws/state (snapshot, then events), those waiting for the user first, each blocked one
// saying what it asks with its answers on the row; selecting a row shows that session's
// terminal beside the list (one live terminal, not one per session), or as a view of its own on
// a phone. The cards layout (a card and a terminal per session) is the second view. The page
// survives dropped sockets and server restarts, and is driven by keys (see `?`).

import { Alerts, setBlockedCount } from "./alerts.js";
import { api, onAuthFailure } from "./api.js";
import { Card } from "./cards.js";
import { NewSessionForm } from "./form.js";
import { installKeys } from "./keys.js";
import { LedgerView } from "./ledger.js";
import { PolicySwitch } from "./policy.js";
import { LiveSocket } from "./live.js";
import { applyRole, PeopleView } from "./people.js";
import { cardOrder, groupOf, matchesFilter, queueOrder, shortPath, stateCounts } from "./parse.js";
import { Peeks, RETRY_MS, Row } from "./queue.js";

const $ = (id) => document.getElementById(id);
const els = {
  queue: $("queue"),
  detail: $("detail"),
  cards: $("cards"),
  empty: $("empty"),
  noMatch: $("no-match"),
  summary: $("summary"),
  summaryText: $("summary-text"),
  connection: $("connection"),
  banner: $("banner"),
  backdrop: $("backdrop"),
  newToggle: $("new-toggle"),
  newForm: $("new-session"),
  filter: $("filter"),
  groupBy: $("group-by"),
  layoutToggle: $("layout-toggle"),
  keysHelp: $("keys-help"),
};

const LAYOUT_KEY = "panewatch.layout";
const FIT_KEY = "panewatch.fit";
const GROUP_KEY = "panewatch.group";
const WIDE = matchMedia("(min-width: 1000px)");

const sessions = new Map(); // id -> the API's session object
const rows = new Map(); // id -> Row (the queue)
const cards = new Map(); // id -> Card: every session's in the cards layout, the detail's in the queue
let layoutMode = localStorage.getItem(LAYOUT_KEY) === "cards" ? "cards" : "queue";
let fitMode = localStorage.getItem(FIT_KEY) === "view" ? "view" : "pane";
let groupBy = ["folder", "node"].includes(localStorage.getItem(GROUP_KEY)) ? localStorage.getItem(GROUP_KEY) : "";
const filter = { text: "", state: null };
let selected = null; // the queue's current session
let detail = null; // the Card shown beside the list (or as the phone's second view)
let snapshots = 0; // snapshots received on /ws/state (the first follows the page's own applyRole)
let autoOpened = false; // a wide screen opens the first session's terminal once, after the first snapshot
let followTimer = null; // the terminal view following keyboard moves
let skew = 0; // server clock minus ours, in seconds
let everUp = false;
let down = null; // {since, retryAt, reason} while /ws/state is down
let idsBeforeDrop = null;
let authLost = false;
let loggedOut = false;
let large = null; // the card shown large
let pinned = null; // {id, index}: a session just answered keeps its place until the user moves on
const messages = new Map(); // id -> the agent's last desktop notification, until its state changes

const serverNow = () => Date.now() / 1000 + skew;

// -- what the page read of the screens --------------------------------------------------------
const peeks = new Peeks((id, peek, tries) => {
  const s = sessions.get(id);
  if (!s) return;
  peek.since = s.since; // a blocked read answers for this blocked episode only
  if (s.state === "blocked" && peek.state !== "blocked" && tries < 3) peeks.want(id, RETRY_MS, tries + 1);
  rows.get(id)?.setPeek(peek);
  cards.get(id)?.renderPrompt();
});

/** The screen read for a session, while it still describes the session's current state. */
function peekOf(id) {
  const p = peeks.get(id);
  const s = sessions.get(id);
  if (!p || !s) return null;
  if (p.state === "blocked" && (s.state !== "blocked" || p.since !== s.since)) return { ...p, prompt: null, request: null, excerpt: [] };
  return p;
}

// the ledger of decisions, on the page (every session) and on a session's view (its own)
const ledgerView = new LedgerView($("ledger"));

// -- contexts the rows and cards call back into ---------------------------------------------
const cardContext = {
  serverNow,
  peek: peekOf,
  fitMode: () => fitMode,
  setFitMode,
  onDeleted: (id) => { removeSession(id); render(); },
  onLedger: (id) => ledgerView.open({ session: id }),
  onAccess: (id) => peopleView.open({ session: id }),
  onLarge: (card, open) => {
    if (open && large && large !== card) large.setLarge(false);
    large = open ? card : large === card ? null : large;
    els.backdrop.hidden = !large;
    document.body.classList.toggle("has-large", Boolean(large));
    // a real modal: nothing behind it takes focus or clicks
    for (const el of [document.querySelector("header.top"), els.banner, $("last-alert-line"), els.newForm,
      els.empty, document.querySelector(".toolbar"), els.queue,
      ...[...cards.values()].filter((c) => c !== large).map((c) => c.el)]) {
      if (el) el.inert = Boolean(large);
    }
  },
  onAnswered: (card) => {
    const index = [...els.cards.children].indexOf(card.el);
    if (index >= 0) pinned = { id: card.id, index };
  },
  onRelease: (card) => releaseTo(card.id),
  onClose: () => closeDetail({ focusRow: true }),
  onCreated: (session, note) => {
    upsert(session);
    render();
    if (layoutMode !== "queue") return;
    select(session.id, { open: true, focusRow: true });
    if (note && detail && detail.id === session.id) detail.showResult(note, "ok");
  },
  onRenamed: (info) => {
    upsert(info);
    render();
  },
};

const rowContext = {
  serverNow,
  peek: peekOf,
  onOpen: (row, { enter }) => select(row.id, { open: true, enter }),
  onAnswered: (row) => {
    const index = queueIds().indexOf(row.id);
    if (index >= 0) pinned = { id: row.id, index };
  },
};

// the user moved on from an answered session: it may take its place in the order again
function unpin(e) {
  if (!pinned) return;
  const holder = layoutMode === "queue" ? rows.get(pinned.id)?.el : cards.get(pinned.id)?.el;
  const inDetail = layoutMode === "queue" && detail && detail.id === pinned.id && detail.el.contains(e.target);
  if (!holder || (!holder.contains(e.target) && !inDetail)) {
    pinned = null;
    render();
  }
}
document.addEventListener("pointerdown", unpin, true);
document.addEventListener("focusin", unpin, true);

// -- sessions ---------------------------------------------------------------------------------
function upsert(session) {
  const before = sessions.get(session.id);
  const merged = { ...(before || {}), ...session };
  if (before && before.state !== merged.state) messages.delete(session.id);
  sessions.set(session.id, merged);
  const row = rows.get(session.id);
  if (row) row.update(merged);
  else rows.set(session.id, new Row(merged, rowContext));
  const card = cards.get(session.id);
  if (card) card.update(merged);
  else if (layoutMode === "cards") cards.set(session.id, new Card(merged, cardContext));
  if (!before || before.state !== merged.state || before.since !== merged.since) peeks.want(session.id);
}

function removeSession(id) {
  sessions.delete(id);
  refreshing.delete(id);
  alerts.forget(id);
  peeks.forget(id);
  messages.delete(id);
  if (pinned && pinned.id === id) pinned = null;
  const row = rows.get(id);
  if (row) {
    rows.delete(id);
    row.destroy();
  }
  if (detail && detail.id === id) closeDetail({ focusRow: false });
  const card = cards.get(id);
  if (card) {
    cards.delete(id);
    if (large === card) cardContext.onLarge(card, false);
    card.destroy();
  }
  if (selected === id) selected = null;
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

// -- the queue --------------------------------------------------------------------------------
function visible(s) {
  const extra = [peeks.get(s.id)?.lastLine, ...(peeks.get(s.id)?.excerpt || []), messages.get(s.id)];
  return matchesFilter(s, extra, filter);
}

/** The queue's sessions in order, as shown (the filter applied, an answered one pinned). */
function queueIds() {
  const order = queueOrder([...sessions.values()].filter(visible));
  if (pinned && order.includes(pinned.id)) {
    if (sessions.get(pinned.id).state === "blocked") pinned = null; // asking again: first, as any blocked one
    else order.splice(Math.min(pinned.index, order.length - 1), 0, ...order.splice(order.indexOf(pinned.id), 1));
  }
  return order;
}

/** Move `children` into `parent` in this order without losing the focus or a half-typed text. */
function arrange(parent, children) {
  const current = [...parent.children];
  if (current.length === children.length && current.every((el, i) => el === children[i])) return;
  const active = document.activeElement;
  const selection = active && typeof active.selectionStart === "number"
    ? [active.selectionStart, active.selectionEnd] : null;
  children.forEach((el, i) => {
    if (parent.children[i] !== el) parent.insertBefore(el, parent.children[i] || null);
  });
  while (parent.children.length > children.length) parent.lastElementChild.remove();
  if (active && active !== document.activeElement && active.isConnected) {
    active.focus({ preventScroll: true });
    if (selection) try { active.setSelectionRange(...selection); } catch { /* not a text field */ }
  }
}

const groupEls = new Map(); // key -> {el, title, list}
function groupSection(key) {
  let g = groupEls.get(key);
  if (!g) {
    const title = document.createElement("h2");
    title.className = "group-title";
    const list = document.createElement("ol");
    list.className = "rows";
    const el = document.createElement("section");
    el.className = "group";
    el.append(title, list);
    g = { el, title, list };
    groupEls.set(key, g);
  }
  return g;
}

function layoutQueue() {
  const order = queueIds();
  const active = document.activeElement;
  if (!groupBy) {
    const g = groupSection("");
    g.title.hidden = true;
    g.list.setAttribute("aria-label", "Sessions");
    arrange(g.list, order.map((id) => rows.get(id).el));
    arrange(els.queue, [g.el]);
  } else {
    // groups in the order of their first session (so the group with the oldest wait is first)
    const byGroup = new Map();
    for (const id of order) {
      const key = groupOf(sessions.get(id), groupBy);
      if (!byGroup.has(key)) byGroup.set(key, []);
      byGroup.get(key).push(id);
    }
    const sections = [];
    for (const [key, ids] of byGroup) {
      const g = groupSection(`${groupBy}:${key}`);
      g.title.hidden = false;
      const blocked = ids.filter((id) => sessions.get(id).state === "blocked").length;
      g.title.textContent = `${groupBy === "folder" ? shortPath(key) : key} · ${ids.length}${blocked ? ` · ${blocked} blocked` : ""}`;
      g.title.title = key;
      g.list.setAttribute("aria-label", `Sessions in ${key}`);
      arrange(g.list, ids.map((id) => rows.get(id).el));
      sections.push(g.el);
    }
    arrange(els.queue, sections);
  }
  if (active && active !== document.activeElement && active.isConnected) active.focus({ preventScroll: true });
  for (const [id, row] of rows) row.setSelected(id === selected, detail !== null && detail.id === id);
  return order;
}

/** The cards layout: blocked cards first, without losing the focus or a terminal's scroll. */
function layoutCards() {
  let order = cardOrder([...sessions.values()].filter(visible)).filter((id) => cards.has(id));
  if (pinned && cards.has(pinned.id) && order.includes(pinned.id)) {
    if (sessions.get(pinned.id).state === "blocked") pinned = null;
    else order.splice(Math.min(pinned.index, order.length - 1), 0, ...order.splice(order.indexOf(pinned.id), 1));
  }
  const container = els.cards;
  const current = [...container.children].map((el) => el.dataset.id);
  if (current.length !== order.length || current.some((id, i) => id !== order[i])) {
    // moving a node resets the scroll of what is inside it: keep each terminal's place
    const scrolls = new Map([...cards.values()].filter((c) => c.el.isConnected).map((c) => [c, c.saveScroll()]));
    arrange(container, order.map((id) => cards.get(id).el));
    for (const [card, saved] of scrolls) card.restoreScroll(saved);
  }
  for (const card of cards.values()) card.mount();
  order = order.filter(Boolean);
  return order;
}

function render() {
  const shown = layoutMode === "queue" ? layoutQueue() : layoutCards();
  const all = [...sessions.values()];
  renderSummary(all);
  setBlockedCount(all.filter((s) => s.state === "blocked").length);
  els.empty.hidden = all.length > 0 || !everUp;
  els.noMatch.hidden = all.length === 0 || shown.length > 0;
  if (layoutMode === "queue" && !autoOpened && everUp) {
    // a wide screen opens the first session's terminal beside the list at once
    autoOpened = true;
    if (WIDE.matches && shown.length && !detail && !selected) select(shown[0], { open: true });
  }
}

function renderSummary(all) {
  const counts = stateCounts(all);
  const buttons = [];
  const total = document.createElement("button");
  total.type = "button";
  total.className = "count count-all";
  total.textContent = all.length === 0 ? (everUp ? "No sessions" : "Connecting…")
    : `${all.length} session${all.length === 1 ? "" : "s"}`;
  total.setAttribute("aria-pressed", String(!filter.state));
  total.title = "Show every session";
  total.addEventListener("click", () => setStateFilter(null));
  buttons.push(total);
  for (const [state, n] of counts) {
    const b = document.createElement("button");
    b.type = "button";
    b.className = `count state-${state}`;
    b.dataset.state = state;
    const dot = document.createElement("span");
    dot.className = "dot";
    dot.setAttribute("aria-hidden", "true");
    b.append(dot, `${n} ${state}`);
    b.setAttribute("aria-pressed", String(filter.state === state));
    b.title = filter.state === state ? "Show every state again" : `Show only the ${state} sessions`;
    b.addEventListener("click", () => setStateFilter(filter.state === state ? null : state));
    buttons.push(b);
  }
  // a filtered state nobody is in any more still shows, so that it can be switched off
  if (filter.state && !counts.some(([s]) => s === filter.state)) {
    const b = document.createElement("button");
    b.type = "button";
    b.className = `count state-${filter.state}`;
    b.dataset.state = filter.state;
    b.textContent = `0 ${filter.state}`;
    b.setAttribute("aria-pressed", "true");
    b.addEventListener("click", () => setStateFilter(null));
    buttons.push(b);
  }
  const key = buttons.map((b) => `${b.textContent}|${b.getAttribute("aria-pressed")}`).join(",");
  if (key !== els.summary.dataset.key) {
    const focused = els.summary.contains(document.activeElement)
      ? (document.activeElement.dataset.state || "all") : null;
    els.summary.replaceChildren(...buttons);
    els.summary.dataset.key = key;
    if (focused) (buttons.find((b) => (b.dataset.state || "all") === focused) || buttons[0]).focus({ preventScroll: true });
  }
  const text = all.length === 0 ? (everUp ? "No sessions" : "Connecting…")
    : [`${all.length} session${all.length === 1 ? "" : "s"}`, ...counts.map(([s, n]) => `${n} ${s}`)].join(" · ");
  if (els.summaryText.textContent !== text) els.summaryText.textContent = text;
}

function setStateFilter(state) {
  filter.state = state;
  render();
}

// -- selection and the detail view --------------------------------------------------------------
/**
 * Make `id` the current session. `open`: show its terminal (beside the list, or as the phone's
 * view); `enter`: and put the keyboard in it (an explicit act: Enter on the row, or a click).
 */
function select(id, { open = false, enter = false, focusRow = false } = {}) {
  if (!sessions.has(id)) return;
  selected = id;
  if (layoutMode === "cards") {
    focusCard(id);
    return;
  }
  if (open || enter) openDetail(id);
  for (const [rid, row] of rows) row.setSelected(rid === id, detail !== null && detail.id === rid);
  if (focusRow) rows.get(id)?.focus();
  if (enter && detail) {
    const card = detail;
    if (card.term) requestAnimationFrame(() => card.term.focus());
    else card.sendInput.focus();
  } else if (open && !WIDE.matches && detail) {
    detail.el.querySelector("h2")?.focus({ preventScroll: true });
  }
}

function openDetail(id) {
  if (detail && detail.id === id) return;
  closeDetail({ focusRow: false, keepSelection: true });
  const card = new Card(sessions.get(id), cardContext, { mode: "detail" });
  detail = card;
  cards.set(id, card);
  els.detail.replaceChildren(card.el);
  els.detail.hidden = false;
  document.body.classList.add("detail-open");
  card.mount();
  card.applyFit();
  window.scrollTo({ top: WIDE.matches ? window.scrollY : 0 });
}

function closeDetail({ focusRow = false, keepSelection = false } = {}) {
  if (!keepSelection) clearTimeout(followTimer);
  if (!detail) return;
  const card = detail;
  detail = null;
  if (large === card) card.setLarge(false);
  cards.delete(card.id);
  card.destroy();
  els.detail.hidden = true;
  document.body.classList.remove("detail-open");
  if (!keepSelection) {
    for (const [rid, row] of rows) row.setSelected(rid === selected, false);
    if (focusRow && selected) rows.get(selected)?.focus();
  }
}

/** The release key in a terminal: the keyboard goes back to the page, next to that terminal. */
function releaseTo(id) {
  if (layoutMode === "queue") {
    const row = rows.get(id);
    if (row && row.el.isConnected && row.el.offsetParent !== null) row.focus();
    else cards.get(id)?.el.querySelector("h2")?.focus();
  } else {
    const card = cards.get(id);
    (card?.large ? card.closeLarge : card?.el.querySelector("h2"))?.focus();
  }
}

function setFitMode(mode) {
  fitMode = mode === "view" ? "view" : "pane";
  localStorage.setItem(FIT_KEY, fitMode);
  document.body.dataset.fit = fitMode;
  for (const card of cards.values()) card.applyFit();
}

function setLayout(mode) {
  if (mode === layoutMode) return;
  layoutMode = mode;
  localStorage.setItem(LAYOUT_KEY, mode);
  document.body.dataset.layout = mode;
  els.layoutToggle.textContent = mode === "queue" ? "Cards view" : "Queue view";
  if (mode === "cards") {
    closeDetail({ keepSelection: true });
    for (const s of sessions.values()) if (!cards.has(s.id)) cards.set(s.id, new Card(s, cardContext));
    els.queue.parentElement.hidden = true;
    els.cards.hidden = false;
  } else {
    if (large) large.setLarge(false);
    for (const card of cards.values()) card.destroy();
    cards.clear();
    els.cards.replaceChildren();
    els.cards.hidden = true;
    els.queue.parentElement.hidden = false;
  }
  render();
}

/** Show a session (a notification or the last-alert line was clicked). */
function focusSession(id) {
  if (!sessions.has(id)) return;
  if (layoutMode === "queue") {
    if (filter.state || filter.text) {
      const s = sessions.get(id);
      if (!visible(s)) {
        filter.state = null;
        filter.text = els.filter.value = "";
        render();
      }
    }
    select(id, { open: true, focusRow: WIDE.matches });
    return;
  }
  focusCard(id);
}

function focusCard(id) {
  const card = cards.get(id);
  if (!card) return;
  card.el.scrollIntoView({ behavior: "smooth", block: "center" });
  card.largeButton.focus({ preventScroll: true });
  card.el.classList.remove("flash");
  void card.el.offsetWidth; // restart the animation
  card.el.classList.add("flash");
}

// -- the keyboard ---------------------------------------------------------------------------------
function currentRowId() {
  const active = document.activeElement;
  const row = active instanceof Element ? active.closest(".row") : null;
  if (row && rows.has(row.dataset.id)) return row.dataset.id;
  if (active instanceof Element && detail && detail.el.contains(active)) return detail.id;
  return null;
}

/** Keyboard navigation: the row takes the focus at once; an open terminal view follows it when
 * the keys stop (holding j must not open a terminal per row on the way). */
function moveTo(id) {
  if (!id) return;
  const follow = detail !== null && WIDE.matches;
  select(id, { focusRow: true });
  clearTimeout(followTimer);
  if (follow) {
    followTimer = setTimeout(() => {
      if (selected === id && sessions.has(id) && layoutMode === "queue") select(id, { open: true });
    }, 150);
  }
}

installKeys({
  active: () => layoutMode === "queue" && !large,
  next(delta) {
    const order = queueIds();
    if (!order.length) return;
    const at = order.indexOf(currentRowId() ?? "");
    if (at < 0) moveTo(order[delta > 0 ? 0 : order.length - 1]);
    else moveTo(order[Math.max(0, Math.min(order.length - 1, at + delta))]);
  },
  edge(last) {
    const order = queueIds();
    if (order.length) moveTo(order[last ? order.length - 1 : 0]);
  },
  nextWaiting(delta) {
    const order = queueIds();
    const waiting = order.filter((id) => sessions.get(id).state === "blocked");
    if (!waiting.length) return;
    const at = order.indexOf(currentRowId() ?? "");
    if (at < 0) {
      moveTo(delta > 0 ? waiting[0] : waiting[waiting.length - 1]);
      return;
    }
    // the next blocked one after the current (around the end), in the order shown
    for (let i = 1; i <= order.length; i++) {
      const id = order[(at + delta * i + order.length * (i + 1)) % order.length];
      if (sessions.get(id).state === "blocked" && id !== order[at]) {
        moveTo(id);
        return;
      }
    }
  },
  enter() {
    const id = currentRowId() ?? selected;
    if (id) select(id, { open: true, enter: true });
  },
  toggle() {
    clearTimeout(followTimer);
    const id = currentRowId() ?? selected;
    if (detail) closeDetail({ focusRow: true });
    else if (id) select(id, { open: true });
  },
  choose(digit) {
    const id = currentRowId() ?? selected;
    if (!id) return false;
    const row = rows.get(id);
    if (detail && detail.id === id && detail.el.contains(document.activeElement)) {
      const button = [...detail.optionsEl.querySelectorAll("button.option:not(.option-esc)")][Number(digit) - 1];
      if (button) { button.click(); return true; }
    }
    if (!row) return false;
    if (!row.el.isConnected || row.el.offsetParent === null) return false;
    return row.choose(digit);
  },
  escape() {
    if (detail) {
      closeDetail({ focusRow: true });
      return true;
    }
    return false;
  },
  filter() {
    els.filter.focus();
    els.filter.select();
  },
  clearFilter() {
    if (!els.filter.value && !filter.state) return false;
    els.filter.value = "";
    filter.text = "";
    filter.state = null;
    render();
    return true;
  },
  help() {
    if (!els.keysHelp.open) els.keysHelp.showModal();
  },
  cycleGroup() {
    const options = [...els.groupBy.options].map((o) => o.value);
    els.groupBy.value = options[(options.indexOf(els.groupBy.value) + 1) % options.length];
    els.groupBy.dispatchEvent(new Event("change"));
  },
  toggleFit() {
    setFitMode(fitMode === "pane" ? "view" : "pane");
  },
  toggleLayout() {
    setLayout(layoutMode === "queue" ? "cards" : "queue");
  },
});

// -- events from /ws/state -------------------------------------------------------------------------
const refreshing = new Map(); // id -> the read of its record in flight
const removing = new Set(); // sessions the page is deleting: no more reads of them

function refresh(id) {
  if (removing.has(id) || refreshing.has(id)) return refreshing.get(id);
  const read = refreshOnce(id).finally(() => refreshing.delete(id));
  refreshing.set(id, read);
  return read;
}

/** Before the page deletes a session: stop reading it, and let the reads in flight end (a read
 * after the delete would only find it gone). */
async function quiesce(id) {
  removing.add(id);
  await Promise.all([peeks.hold(id), refreshing.get(id)]);
}

async function refreshOnce(id) {
  try {
    const fresh = await api.session(id);
    if (fresh && sessions.has(id)) {
      upsert(fresh);
      render();
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
      // the server sends a fresh snapshot when who may see or do what changed (a role, a
      // restriction): the page asks its role again, so its controls follow without a reload
      if (snapshots++ > 0) applyRole();
      break;
    case "ping":
      if (typeof msg.at === "number") skew = msg.at - Date.now() / 1000;
      break;
    case "created":
    case "renamed":
      if (msg.session && msg.session.id) upsert(msg.session);
      break;
    case "deleted":
      removeSession(msg.session);
      break;
    case "state": {
      const s = sessions.get(msg.session);
      if (!s) break; // unknown yet: the next snapshot brings it
      const change = { id: msg.session, state: msg.state, since: msg.at, source: msg.source, rule: msg.rule, why: msg.why };
      // what a blocked pane asks comes with its event once the server sends it; gone when it is not blocked
      for (const key of ["request", "prompt"]) {
        if (msg[key] !== undefined) change[key] = msg[key];
        else if (msg.state !== "blocked") change[key] = null;
      }
      change.policy = null; // a new state: the policy decides again if it is a new prompt
      if (msg.exit_code !== undefined) change.exit_code = msg.exit_code;
      if (msg.error !== undefined) change.error = msg.error;
      upsert(change);
      if (msg.state === "exited" || msg.state === "lost") refresh(msg.session); // exit code, error, resume offer
      break;
    }
    case "policy": {
      const s = sessions.get(msg.session);
      if (s && s.state === "blocked") {
        upsert({ id: msg.session, policy: { action: msg.action, rule: msg.rule, reason: msg.reason, would: msg.would } });
      }
      policySwitch.refresh(); // a decision may come from a policy paused or changed elsewhere
      break;
    }
    case "notification":
      alerts.notify(msg);
      if (msg.kind === "desktop") {
        alerts.showAgentMessage(msg);
        messages.set(msg.session, msg.body || msg.title || "");
        rows.get(msg.session)?.setMessage(messages.get(msg.session));
      }
      break;
    default:
      break;
  }
  render();
}

// -- connection banner -------------------------------------------------------------------------
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

function stopAll() {
  down = null;
  state.stop();
  for (const card of cards.values()) card.screenSocket.stop();
}

function loginLost() {
  if (authLost) return;
  authLost = true;
  stopAll();
  if (loggedOut) {
    showLoggedOut();
    return;
  }
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

function showLoggedOut() {
  setConnection("auth", "logged out");
  showBanner("info", "Logged out: this browser's login is revoked. To come back, open the login URL that "
    + "“panewatch serve” printed (…/?token=…).");
}

async function logout() {
  const button = $("logout");
  button.disabled = true;
  loggedOut = true;
  try {
    await api.logout();
    authLost = true;
    stopAll();
    closeDetail();
    showLoggedOut();
  } catch (err) {
    loggedOut = false;
    button.disabled = false;
    showBanner("error", `Could not log out: ${err.message}`, "Dismiss", hideBanner);
  }
}

onAuthFailure(() => loginLost());

// -- the page's controls -------------------------------------------------------------------------
const alerts = new Alerts({
  notifyButton: $("notify"),
  notifySwitch: $("notify-switch"),
  notifyOn: $("notify-on"),
  soundToggle: $("sound"),
  lastAlert: $("last-alert"),
  lastAlertLine: $("last-alert-line"),
}, focusSession);

$("last-alert").addEventListener("click", (e) => focusSession(e.currentTarget.dataset.session));
$("logout").addEventListener("click", logout);
$("more-toggle").addEventListener("click", (e) => {
  const open = !document.body.classList.contains("more-open");
  document.body.classList.toggle("more-open", open);
  e.currentTarget.setAttribute("aria-expanded", String(open));
});
$("keys-toggle").addEventListener("click", () => els.keysHelp.showModal());
$("ledger-toggle").addEventListener("click", () => ledgerView.open());
const policySwitch = new PolicySwitch($("policy-switch"));
policySwitch.refresh();
// people and roles: the page hides what this caller's role may not do; owners manage users
const peopleView = new PeopleView($("people"), { sessions: () => sessions.values() });
$("people-toggle").addEventListener("click", () => peopleView.open());
applyRole();
$("clear-filter").addEventListener("click", () => {
  els.filter.value = "";
  filter.text = "";
  filter.state = null;
  render();
  els.filter.focus();
});
window.addEventListener("resize", () => {
  clearTimeout(window.__fitTimer);
  window.__fitTimer = setTimeout(() => large && large.fitToWindow(), 200);
});
WIDE.addEventListener("change", () => {
  detail?.applyFit();
  render();
});

els.filter.addEventListener("input", () => {
  filter.text = els.filter.value;
  render();
});
els.groupBy.value = groupBy;
els.groupBy.addEventListener("change", () => {
  groupBy = els.groupBy.value;
  localStorage.setItem(GROUP_KEY, groupBy);
  render();
});
els.layoutToggle.addEventListener("click", () => setLayout(layoutMode === "queue" ? "cards" : "queue"));

const form = new NewSessionForm(els.newForm, {
  onCreated(session) {
    upsert(session); // the "created" event may come a moment later
    render();
  },
  onStarted(session) {
    // started: show it, without taking the keyboard or the scroll from the form
    if (!sessions.has(session.id)) return;
    if (layoutMode === "queue" && WIDE.matches) select(session.id, { open: true });
  },
  beforeRemove: (id) => quiesce(id),
  onFailed(id) {
    removeSession(id);
    removing.delete(id);
    render();
  },
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
  for (const row of rows.values()) row.tick();
  for (const card of cards.values()) card.tick();
  peeks.refreshStale(sessions.values());
  renderDown();
}, 1000);

// For debugging from the console (and for the tests): drop every socket as a network would.
window.panewatch = {
  sessions,
  cards,
  rows,
  state,
  get detail() { return detail; },
  get selected() { return selected; },
  dropConnections() {
    state.drop();
    for (const card of cards.values()) card.screenSocket.drop();
  },
};

// the sticky header's height, for what sits below it (the terminal view's height)
new ResizeObserver(([entry]) => {
  document.documentElement.style.setProperty("--top-height", `${Math.ceil(entry.target.getBoundingClientRect().height)}px`);
}).observe(document.querySelector("header.top"));

document.body.dataset.layout = layoutMode;
document.body.dataset.fit = fitMode;
els.layoutToggle.textContent = layoutMode === "queue" ? "Cards view" : "Queue view";
els.cards.hidden = layoutMode !== "cards";
els.queue.parentElement.hidden = layoutMode !== "queue";
setConnection("connecting", "connecting");
state.start();
form.loadAgents();
render();
