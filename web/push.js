// Web Push for this browser: subscribe with the server's VAPID key, send a test that proves
// the whole path, read each device's delivery figures. The service worker (/sw.js) shows the
// pushes and posts their receipts.

async function call(method, path, body) {
  const init = { method, headers: { Accept: "application/json" }, credentials: "same-origin", cache: "no-store" };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    const detail = typeof data.detail === "string" ? data.detail : JSON.stringify(data.detail || "");
    throw new Error(detail || `HTTP ${response.status}`);
  }
  return data;
}
export { call };

/** Why push cannot work here, or null: browsers allow it on https:// and localhost pages only. */
export function unsupported() {
  if (!window.isSecureContext) return "Push needs https:// (or localhost): see the README's set-ups";
  if (!("serviceWorker" in navigator)) return "This browser has no service workers";
  if (!("PushManager" in window)) return "This browser has no Web Push (on iOS: add to the home screen first)";
  return null;
}

/** Register the service worker (scope: the whole app); resolves once one is active. */
export async function registerWorker() {
  if (!("serviceWorker" in navigator)) return null;
  await navigator.serviceWorker.register("/sw.js", { scope: "/" });
  return navigator.serviceWorker.ready;
}

function keyBytes(base64url) {
  const padded = base64url.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - (base64url.length % 4)) % 4);
  return Uint8Array.from(atob(padded), (c) => c.charCodeAt(0));
}

function sameKey(subscription, key) {
  const current = subscription.options && subscription.options.applicationServerKey;
  if (!current) return true;
  const a = new Uint8Array(current);
  return a.length === key.length && a.every((byte, i) => byte === key[i]);
}

/** This browser's push subscription, if it has one. */
export async function currentSubscription() {
  if (unsupported()) return null;
  const registration = await navigator.serviceWorker.getRegistration("/");
  return registration ? registration.pushManager.getSubscription() : null;
}

/** Ask for permission, subscribe (again, if the server's key changed) and register with the server. */
export async function enablePush(name) {
  const why = unsupported();
  if (why) throw new Error(why);
  const permission = await Notification.requestPermission();
  if (permission !== "granted") throw new Error(`notifications are ${permission} for this site: allow them in the browser`);
  const registration = await registerWorker();
  const { publicKey } = await call("GET", "/api/push/key");
  const key = keyBytes(publicKey);
  let subscription = await registration.pushManager.getSubscription();
  if (subscription && !sameKey(subscription, key)) {
    await subscription.unsubscribe();
    subscription = null;
  }
  subscription ??= await registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key });
  return call("POST", "/api/push/subscriptions", { ...subscription.toJSON(), name: name || undefined });
}

/** Push a test to this browser and wait for its receipt: {ok, steps: [{step, ok, detail}]}. */
export function sendTest() {
  return call("POST", "/api/push/test", {});
}

/** Subscriptions and per-device delivery figures (last sent, last receipt, without receipt). */
export function pushStatus() {
  return call("GET", "/api/push/subscriptions");
}
