// Paired devices: a one-time code (and its QR) for a phone, the list with last seen, revocation.

import { call } from "./push.js";

/** A new pairing code: {code, url, qr_svg (a data: URI), expires_in_s, note}. */
export function newPairing() {
  return call("POST", "/api/devices/pair");
}

/** {devices: [{id, name, created, last_seen, revoked, sockets}], you: {kind, id, name}} */
export function listDevices() {
  return call("GET", "/api/devices");
}

/** Revoke at once: the device's credential stops working, its sockets close, its pushes stop. */
export function revokeDevice(id) {
  return call("DELETE", `/api/devices/${encodeURIComponent(id)}`);
}
