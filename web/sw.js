// Panewatch's service worker: the app shell from a cache (the page opens offline, then
// reconnects), Web Push shown as notifications with a receipt posted for each, and answers
// from a notification's actions. Live data (/api, /ws) never comes from a cache.
//
// Every push carries a receipt id: "shown" is posted when the notification is up, "action" or
// "clicked" when the user acts. The server counts pushes without a receipt per device and
// escalates a prompt nobody saw, so a receipt that fails to post is retried a few times.

const SHELL = "panewatch-shell-v1";
const PRECACHE = ["/manifest.webmanifest", "/static/icons/icon-192.png", "/static/icons/icon-512.png"];
const NEVER_CACHED = ["/api/", "/ws/", "/pair", "/logout", "/sw.js", "/report", "/metrics", "/docs", "/healthz"];

self.addEventListener("install", (event) => {
  event.waitUntil(caches.open(SHELL).then((cache) => cache.addAll(PRECACHE)).then(() => self.skipWaiting()));
});

self.addEventListener("activate", (event) => {
  event.waitUntil((async () => {
    for (const name of await caches.keys()) if (name !== SHELL) await caches.delete(name);
    await self.clients.claim();
  })());
});

// The shell: the page and /static/ files, from the network when it answers (so a new release
// shows at once), else from the cache. Nothing else is intercepted.
self.addEventListener("fetch", (event) => {
  const request = event.request;
  const url = new URL(request.url);
  if (request.method !== "GET" || url.origin !== self.location.origin) return;
  if (NEVER_CACHED.some((prefix) => url.pathname.startsWith(prefix))) return;
  const shell = request.mode === "navigate" ? url.pathname === "/" : url.pathname.startsWith("/static/")
    || url.pathname === "/manifest.webmanifest";
  if (!shell) return;
  event.respondWith((async () => {
    const cache = await caches.open(SHELL);
    try {
      const response = await fetch(request);
      // the page itself is cached without its query (?token= must never sit in a cache)
      if (response.ok && !url.search) await cache.put(request, response.clone());
      return response;
    } catch (err) {
      const kept = await cache.match(request, { ignoreSearch: true });
      if (kept) return kept;
      throw err;
    }
  })());
});

/** Tell the server a push reached the screen (or the user acted on it); a few tries. */
async function sendReceipt(id, event) {
  if (!id) return false;
  for (let attempt = 0; attempt < 3; attempt += 1) {
    try {
      const response = await fetch(`/api/push/receipts/${encodeURIComponent(id)}`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ event }),
        credentials: "same-origin",
      });
      if (response.ok || response.status === 404) return response.ok;
    } catch {
      // offline for a moment: try again
    }
    await new Promise((resolve) => setTimeout(resolve, 1000 * (attempt + 1)));
  }
  return false;
}

/** What a push shows. The payload's JSON is the server's (see push.py `payload`). */
async function showPush(data) {
  const options = {
    body: data.body || "",
    tag: data.prompt_id ? `panewatch:${data.prompt_id}` : `panewatch:${data.session}:${data.kind}`,
    renotify: true,
    requireInteraction: data.state === "blocked",
    icon: "/static/icons/icon-192.png",
    badge: "/static/icons/icon-192.png",
    data,
    actions: (data.actions || []).map((a) => ({ action: String(a.action), title: String(a.title) })),
  };
  await self.registration.showNotification(data.title || "Panewatch", options);
  await sendReceipt(data.receipt_id, "shown");
}

self.addEventListener("push", (event) => {
  let data;
  try {
    data = event.data ? event.data.json() : {};
  } catch {
    data = { title: "Panewatch", body: event.data ? event.data.text() : "" };
  }
  event.waitUntil(showPush(data));
});

/** The follow-up after an answer: took / did not take / gone / failed (wording from the server). */
function reply(data, outcome, detail) {
  const replies = data.replies || {};
  const fallback = { took: "Answered", not_taken: "Sent, but the agent did not react", gone: "This prompt is gone",
    failed: "Not sent: {detail}" };
  return String(replies[outcome] || fallback[outcome]).replace("{detail}", detail || "");
}

/**
 * Answer the prompt a notification was about with one of its actions: the guarded, confirmed
 * answer, naming the prompt id, so a notification that outlived its prompt changes nothing
 * (409 "this prompt is gone"). Returns the outcome; a follow-up notification says it.
 */
async function answerFrom(data, action) {
  const option = (data.options || [])[Number(action)];
  let outcome = "failed";
  let detail = "that option is not in the notification";
  if (option && data.session && data.prompt_id) {
    const body = { confirm: true, prompt_id: data.prompt_id };
    if (option.option !== undefined && option.option !== null) body.option = option.option;
    else body.keys = option.keys;
    try {
      const response = await fetch(`/api/sessions/${encodeURIComponent(data.session)}/answer`, {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "application/json" },
        body: JSON.stringify(body),
        credentials: "same-origin",
      });
      const result = await response.json().catch(() => ({}));
      detail = typeof result.detail === "string" ? result.detail : `HTTP ${response.status}`;
      if (response.ok) outcome = result.took ? "took" : "not_taken";
      else if (response.status === 409 && detail.startsWith("this prompt is gone")) outcome = "gone";
      else if (response.status === 401 || response.status === 403) detail = "this device is not logged in";
    } catch (err) {
      detail = `the server is unreachable (${err.message})`;
    }
  }
  await self.registration.showNotification(data.name || "Panewatch", {
    body: reply(data, outcome, detail),
    tag: `panewatch:answer:${data.prompt_id || data.session}`,
    icon: "/static/icons/icon-192.png",
    data: { url: data.url, outcome, session: data.session },
  });
  return outcome;
}

async function openSession(url) {
  const target = new URL(url || "/", self.location.origin).href;
  const open = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
  for (const client of open) {
    if (new URL(client.url).origin === self.location.origin && "focus" in client) {
      await client.focus();
      if ("navigate" in client) await client.navigate(target);
      return;
    }
  }
  await self.clients.openWindow(target);
}

/** A click on a notification (``action``: the button pressed, "" for the notification itself). */
async function handleClick(notification, action) {
  const data = notification.data || {};
  notification.close();
  if (action && data.prompt_id) {
    await sendReceipt(data.receipt_id, "action");
    return answerFrom(data, action);
  }
  await sendReceipt(data.receipt_id, "clicked");
  await openSession(data.url);
  return "opened";
}

self.addEventListener("notificationclick", (event) => {
  event.waitUntil(handleClick(event.notification, event.action));
});
