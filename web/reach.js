// "Reach anywhere": the installable app's service worker, push for this browser (enable, send a
// test), pairing a phone and the device list — a module of its own beside the dashboard, which
// it touches only through #reach (its buttons), the cards' data-id (what this page shows) and
// ?session=ID (a notification opened the app on a session).

import { listDevices, newPairing, revokeDevice } from "./devices.js";
import { call, currentSubscription, enablePush, pushStatus, registerWorker, sendTest, unsupported } from "./push.js";

const SEEN_EVERY_MS = 2000; // the server holds a device's push while it said so within 5 s

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === "class") node.className = v;
    else if (k.startsWith("data-")) node.setAttribute(k, v);
    else node[k] = v;
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

function ago(at) {
  if (!at) return "never";
  const s = Math.max(0, Date.now() / 1000 - at);
  if (s < 60) return `${Math.round(s)} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return new Date(at * 1000).toLocaleDateString();
}

const root = document.getElementById("reach");
const panel = el("section", { id: "reach-panel", class: "reach-panel", hidden: true });
panel.setAttribute("aria-live", "polite");
const buttons = {
  enable: el("button", { type: "button", id: "push-enable", textContent: "Enable push" }),
  test: el("button", { type: "button", id: "push-test", textContent: "Send a test", hidden: true }),
  pair: el("button", { type: "button", id: "pair-device", textContent: "Pair a device" }),
  devices: el("button", { type: "button", id: "devices-toggle", textContent: "Devices" }),
};

function show(...children) {
  panel.replaceChildren(el("button", { type: "button", class: "reach-close", textContent: "Close",
    onclick: () => { panel.hidden = true; } }), ...children);
  panel.hidden = false;
}

function failure(what, err) {
  show(el("p", { class: "reach-error", role: "alert", textContent: `${what}: ${err.message}` }));
}

async function renderPushButtons() {
  const why = unsupported();
  if (why) {
    buttons.enable.disabled = true;
    buttons.enable.title = why;
    return;
  }
  const subscription = await currentSubscription().catch(() => null);
  buttons.enable.textContent = subscription ? "Push on" : "Enable push";
  buttons.test.hidden = !subscription;
}

buttons.enable.addEventListener("click", async () => {
  buttons.enable.disabled = true;
  try {
    const sub = await enablePush();
    show(el("p", { textContent: `Push is on for “${sub.name}”. Send a test to prove it arrives.` }));
  } catch (err) {
    failure("Push could not be turned on", err);
  } finally {
    buttons.enable.disabled = false;
    renderPushButtons();
  }
});

buttons.test.addEventListener("click", async () => {
  show(el("p", { textContent: "Sending a test push and waiting for this device's receipt…" }));
  try {
    const result = await sendTest();
    const list = el("ol", { class: "reach-steps" });
    for (const step of result.steps) {
      list.append(el("li", { "data-ok": String(step.ok) }, `${step.ok ? "✓" : "✗"} ${step.step}: ${step.detail}`));
    }
    const failed = result.steps.find((s) => !s.ok);
    show(el("p", { textContent: result.ok ? "The whole path works." : `It failed at: ${failed.step}.` }), list);
  } catch (err) {
    failure("The test could not be sent", err);
  }
});

buttons.pair.addEventListener("click", async () => {
  try {
    const made = await newPairing();
    const minutes = Math.round(made.expires_in_s / 60);
    show(
      el("h2", { textContent: "Pair a device" }),
      el("p", {}, "Open this on the phone (one use, ", `${minutes} minutes):`),
      el("img", { class: "reach-qr", src: made.qr_svg, alt: `QR code of ${made.url}`, width: 240, height: 240 }),
      el("p", {}, el("code", { class: "pair-code", textContent: made.code }), " ", el("a", { href: made.url, textContent: made.url })),
      made.note ? el("p", { class: "reach-note", textContent: made.note }) : null,
    );
  } catch (err) {
    failure("No pairing code", err);
  }
});

async function renderDevices() {
  const [paired, push] = await Promise.all([listDevices(), pushStatus().catch(() => ({ devices: [], warnings: [] }))]);
  const figures = new Map(push.devices.map((d) => [d.device, d]));
  const rows = [];
  const seen = new Set();
  const row = (id, name, lastSeen, revocable, revoked) => {
    seen.add(id);
    const f = figures.get(id);
    const delivery = f
      ? `push: sent ${ago(f.last_sent)}, receipt ${ago(f.last_receipt)}, ${f.without_receipt} without receipt`
      : "no push";
    const tr = el("li", { class: "device", "data-device": id },
      el("strong", { textContent: name }), ` · seen ${ago(lastSeen)} · ${delivery}`);
    if (f && !f.receiving) {
      tr.append(el("span", { class: "not-receiving", textContent: " ⚠ not receiving" }));
      tr.dataset.receiving = "false";
    }
    if (id === paired.you.id) tr.append(el("em", { textContent: " (this browser)" }));
    if (revoked) tr.append(el("span", { textContent: " · revoked" }));
    if (revocable && !revoked) {
      const revoke = el("button", { type: "button", class: "revoke", textContent: "Revoke" });
      revoke.addEventListener("click", async () => {
        if (revoke.dataset.armed !== "1") {
          revoke.dataset.armed = "1";
          revoke.textContent = "Revoke now?";
          return;
        }
        await revokeDevice(id).catch((err) => failure("Not revoked", err));
        renderDevices();
      });
      tr.append(" ", revoke);
    }
    rows.push(tr);
  };
  for (const d of paired.devices) row(d.id, d.name, d.last_seen, true, d.revoked);
  for (const f of push.devices) if (!seen.has(f.device)) row(f.device, f.name, null, false, null);
  const alarm = push.devices.some((d) => !d.receiving);
  buttons.devices.textContent = alarm ? "Devices ⚠" : "Devices";
  show(
    el("h2", { textContent: "Devices" }),
    rows.length ? el("ul", { class: "devices" }, ...rows) : el("p", { textContent: "No paired device yet." }),
    ...push.warnings.map((w) => el("p", { class: "reach-error", textContent: w })),
  );
}

buttons.devices.addEventListener("click", () => renderDevices().catch((err) => failure("No device list", err)));

// -- what this page shows, for the server's per-device suppression ---------------------------
let lastSent = "";
let lastAt = 0;
async function reportSeen() {
  if (!(await currentSubscription().catch(() => null))) return; // only a device that gets pushes
  const looking = document.visibilityState === "visible" && document.hasFocus();
  const shown = looking
    ? [...document.querySelectorAll("main [data-id]")]
      .filter((node) => {
        const r = node.getBoundingClientRect();
        return r.bottom > 0 && r.top < window.innerHeight && r.width > 0;
      })
      .map((node) => node.dataset.id)
    : [];
  const key = shown.join(",");
  if (key === lastSent && (!shown.length || Date.now() - lastAt < SEEN_EVERY_MS)) return;
  lastSent = key;
  lastAt = Date.now();
  await call("POST", "/api/push/seen", { sessions: shown }).catch(() => {});
}
setInterval(reportSeen, SEEN_EVERY_MS);
for (const event of ["visibilitychange", "focus", "blur"]) window.addEventListener(event, () => reportSeen());

// -- ?session=ID: a notification opened the app on a session --------------------------------
function focusLinkedSession() {
  const params = new URLSearchParams(location.search);
  const sid = params.get("session");
  if (!sid) return;
  history.replaceState(null, "", location.pathname);
  const find = () => document.querySelector(`main [data-id="${CSS.escape(sid)}"]`);
  const go = (node) => {
    node.scrollIntoView({ block: "center" });
    node.classList.add("reach-linked");
  };
  const now = find();
  if (now) return go(now);
  const watch = new MutationObserver(() => {
    const node = find();
    if (node) {
      watch.disconnect();
      go(node);
    }
  });
  watch.observe(document.body, { childList: true, subtree: true });
  setTimeout(() => watch.disconnect(), 15000);
}

if (root) {
  root.append(buttons.enable, buttons.test, buttons.pair, buttons.devices);
  (document.querySelector("header") || root).after(panel);
  registerWorker().catch(() => {}).finally(renderPushButtons);
  focusLinkedSession();
}
