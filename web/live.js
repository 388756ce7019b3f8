// A WebSocket that comes back: reconnects with exponential backoff (and jitter) after a drop
// or a server restart, and gives up only when the login is no longer accepted.

import { probe } from "./api.js";

const AUTH_CLOSE_CODES = new Set([4401, 4403]);

export function wsUrl(path) {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  return `${scheme}://${location.host}${path}`;
}

export class LiveSocket {
  /**
   * @param {string} path e.g. "/ws/state"
   * @param {object} handlers
   *   onMessage(msg)       every JSON message
   *   onBinary(buffer)     every binary message (an ArrayBuffer)
   *   onUp()               the first message after (re)connecting arrived
   *   onDown({attempt, delay, reason})  the socket is down; a retry is due in `delay` ms
   *   onGiveUp(reason)     "auth": the login was refused; no more retries
   * @param {object} options
   *   staleMs   close and reconnect when nothing (not even a ping) arrived for this long
   *   probeAuth ask the HTTP API why a handshake failed (browsers hide the status)
   *   finalCodes close codes after which only retryNow() reconnects (4404: no such session)
   */
  constructor(path, handlers, {
    staleMs = 0, probeAuth = false, minDelay = 500, maxDelay = 10000, finalCodes = [],
  } = {}) {
    this.path = path;
    this.handlers = handlers;
    this.staleMs = staleMs;
    this.probeAuth = probeAuth;
    this.minDelay = minDelay;
    this.maxDelay = maxDelay;
    this.finalCodes = new Set(finalCodes);
    this.attempt = 0;
    this.ws = null;
    this.timer = null;
    this.watchdog = null;
    this.stopped = true;
    this.up = false;
    this.lastMessage = 0;
  }

  start() {
    if (!this.stopped) return;
    this.stopped = false;
    this.connect();
    if (this.staleMs) {
      this.watchdog = setInterval(() => {
        if (this.up && Date.now() - this.lastMessage > this.staleMs) this.drop("stale");
      }, Math.min(5000, this.staleMs / 2));
    }
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    clearInterval(this.watchdog);
    this.timer = this.watchdog = null;
    this.detach(true);
  }

  /** Send a JSON message; false when the socket is not open (nothing is queued). */
  send(obj) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return false;
    this.ws.send(JSON.stringify(obj));
    return true;
  }

  /** Retry at once instead of waiting for the backoff. */
  retryNow() {
    if (this.stopped || this.ws) return;
    clearTimeout(this.timer);
    this.connect();
  }

  /** Close the current socket as if the network dropped it (it reconnects). */
  drop(reason = "dropped") {
    if (!this.ws) return;
    const opened = this.ws.readyState === WebSocket.OPEN;
    this.detach(true);
    this.closed({ code: 1006, reason }, opened);
  }

  connect() {
    this.timer = null;
    let ws;
    try {
      ws = new WebSocket(wsUrl(this.path));
    } catch (err) {
      this.closed({ code: 1006, reason: String(err) }, false);
      return;
    }
    ws.binaryType = "arraybuffer";
    this.ws = ws;
    let opened = false;
    ws.onopen = () => { opened = true; };
    ws.onmessage = (event) => {
      this.lastMessage = Date.now();
      if (event.data instanceof ArrayBuffer) {
        this.handlers.onBinary?.(event.data);
        return;
      }
      let msg;
      try {
        msg = JSON.parse(event.data);
      } catch {
        return;
      }
      if (!this.up) {
        this.up = true;
        this.attempt = 0;
        this.handlers.onUp?.();
      }
      this.handlers.onMessage?.(msg);
    };
    ws.onclose = (event) => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.closed(event, opened);
    };
  }

  detach(close) {
    const ws = this.ws;
    this.ws = null;
    this.up = false;
    if (!ws) return;
    ws.onopen = ws.onmessage = ws.onclose = ws.onerror = null;
    if (close && ws.readyState <= WebSocket.OPEN) {
      try { ws.close(); } catch { /* already closing */ }
    }
  }

  async closed(event, opened) {
    this.up = false;
    if (this.stopped) return;
    if (AUTH_CLOSE_CODES.has(event.code)) {
      this.giveUp("auth");
      return;
    }
    if (this.finalCodes.has(event.code)) {
      this.handlers.onDown?.({ attempt: this.attempt, delay: null, reason: "final", code: event.code });
      return;
    }
    let reason = opened ? "dropped" : "unreachable";
    if (!opened && this.probeAuth) {
      const why = await probe();
      if (this.stopped || this.ws || this.timer) return; // stopped or retried meanwhile
      if (why === "auth") {
        this.giveUp("auth");
        return;
      }
      reason = why === "down" ? "unreachable" : "refused";
    }
    const base = Math.min(this.maxDelay, this.minDelay * 2 ** this.attempt);
    const delay = Math.round(base * (0.8 + Math.random() * 0.4));
    this.attempt += 1;
    this.handlers.onDown?.({ attempt: this.attempt, delay, reason, code: event.code });
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.connect(), delay);
  }

  giveUp(reason) {
    this.stop();
    this.handlers.onGiveUp?.(reason);
  }
}
