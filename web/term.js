// A pane as a real terminal: xterm.js fed by /ws/sessions/{id}/term (scrollback, then an exact
// repaint, then live bytes), the user's keystrokes sent back as xterm.js encodes them, and
// resizes asked of the server (which resizes the pane; every page then follows its size).

import { Terminal } from "./vendor/xterm/xterm.js";
import { FitAddon } from "./vendor/addon-fit/addon-fit.js";
import { LiveSocket } from "./live.js";

// the same palette as the rest of the page
const THEME = {
  background: "#0a0b0e", foreground: "#dcdfe4", cursor: "#e4e7ec", cursorAccent: "#0a0b0e",
  selectionBackground: "#3b4261",
  black: "#2e3436", red: "#e06c75", green: "#98c379", yellow: "#d19a66", blue: "#61afef",
  magenta: "#c678dd", cyan: "#56b6c2", white: "#dcdfe4",
  brightBlack: "#5c6370", brightRed: "#ff7b86", brightGreen: "#b5e890", brightYellow: "#e5c07b",
  brightBlue: "#82c4ff", brightMagenta: "#de9bf0", brightCyan: "#7fd6e0", brightWhite: "#ffffff",
};

// What xterm.js answers on its own to the agent's queries (device attributes, cursor position,
// mode reports, colours, focus). The server's emulator already answers them; a page must not.
const TERMINAL_REPLY = /^(?:\x1b\[[?>][\d;]*c|\x1b\[(?!1;[2-8]R)\d+;\d+R|\x1b\[\??[\d;]*\$y|\x1bP|\x1b\]|\x1b\[[IO])/;
// Events by which a user makes xterm.js emit data; anything else it emits is a reply.
const USER_EVENTS = ["keydown", "keypress", "keyup", "beforeinput", "input", "paste", "compositionend",
  "mousedown", "mouseup", "wheel", "touchend"];
const USER_WINDOW_MS = 250;

export const SCROLLBACK = 10000;

export class TermView {
  /**
   * @param {string} id the session id
   * @param {object} handlers
   *   onState(msg)      {state, rule, source, why, since, title, prompt, exit_code}
   *   onHeld(msg)       keys were held back ({bytes}); onReleased({sent, bytes})
   *   onError(detail)   the server refused a message
   *   onTitle(title)    the agent set the terminal title
   *   onLoaded()        the screen is drawn (after each (re)connect)
   *   onUp(), onDown()  the channel's connection
   */
  constructor(id, handlers) {
    this.id = id;
    this.handlers = handlers;
    this.loaded = false;
    this.userAt = -Infinity;
    this.host = document.createElement("div");
    this.host.className = "term-host";
    this.term = new Terminal({
      rows: 24, cols: 80, scrollback: SCROLLBACK, fontSize: matchMedia("(max-width: 600px)").matches ? 11 : 12,
      fontFamily: '"DejaVu Sans Mono", "Cascadia Mono", Menlo, Consolas, "Liberation Mono", monospace',
      theme: THEME, allowProposedApi: false, cursorBlink: false, convertEol: false,
      drawBoldTextInBrightColors: false,
    });
    this.fit = new FitAddon();
    this.term.loadAddon(this.fit);
    this.term.onData((data) => this.typed(data));
    this.term.onBinary((data) => this.typed(data));
    this.term.onTitleChange((title) => this.handlers.onTitle?.(title));
    const mark = () => { this.userAt = performance.now(); };
    for (const type of USER_EVENTS) this.host.addEventListener(type, mark, true);
    this.opened = false;
    this.socket = new LiveSocket(`/ws/sessions/${encodeURIComponent(id)}/term`, {
      onMessage: (msg) => this.onMessage(msg),
      onBinary: (buffer) => this.term.write(new Uint8Array(buffer)),
      onUp: () => this.handlers.onUp?.(),
      onDown: () => this.handlers.onDown?.(),
    }, { minDelay: 500, maxDelay: 10000, finalCodes: [4404] });
  }

  /** Attach to the page (xterm.js measures its font, so the host must be in the document). */
  open() {
    if (this.opened || !this.host.isConnected) return;
    this.opened = true;
    this.term.open(this.host);
  }

  start() { this.socket.start(); }

  stop() { this.socket.stop(); }

  dispose() {
    this.socket.stop();
    this.term.dispose();
  }

  onMessage(msg) {
    switch (msg.type) {
      case "hello":
        this.loaded = false;
        this.term.reset();
        this.term.resize(msg.cols, msg.rows);
        break;
      case "ready":
        // written once xterm.js has parsed everything before it
        this.term.write("", () => {
          // xterm.js draws no cursor until the user first focuses it; the pane's cursor is
          // part of its screen, so show it now (private API, pinned with the vendored version)
          const core = this.term._core;
          if (core && core.coreService && !core.coreService.isCursorInitialized) {
            core.coreService.isCursorInitialized = true;
            this.term.refresh(0, this.term.rows - 1);
          }
          this.term.scrollToBottom();
          this.loaded = true;
          this.handlers.onLoaded?.();
        });
        break;
      case "size":
        if (msg.cols !== this.term.cols || msg.rows !== this.term.rows) this.term.resize(msg.cols, msg.rows);
        this.handlers.onSize?.(msg.rows, msg.cols);
        break;
      case "state":
        this.handlers.onState?.(msg);
        break;
      case "held":
        this.handlers.onHeld?.(msg);
        break;
      case "released":
        this.handlers.onReleased?.(msg);
        break;
      case "error":
        this.handlers.onError?.(msg.detail);
        break;
      default:
        break;
    }
  }

  /** Data xterm.js emitted: the user's keys go to the pane; its own replies do not. */
  typed(data) {
    if (performance.now() - this.userAt > USER_WINDOW_MS) return;
    if (TERMINAL_REPLY.test(data)) return;
    if (!this.socket.send({ type: "input", data })) this.handlers.onError?.("not connected: the keys were not sent");
  }

  /** The held-back keys: send them after all, or drop them. */
  release(send) {
    return this.socket.send({ type: "release", send });
  }

  /** Ask the server to resize the pane (all its terminals follow). */
  resizePane(rows, cols) {
    return this.socket.send({ type: "resize", rows, cols });
  }

  /** The size that fills the host element now, or null before the terminal is drawn. */
  proposeSize() {
    const dims = this.fit.proposeDimensions();
    if (!dims || !Number.isFinite(dims.rows) || !Number.isFinite(dims.cols)) return null;
    return { rows: Math.max(2, Math.min(500, dims.rows)), cols: Math.max(10, Math.min(1000, dims.cols)) };
  }

  focus() { this.term.focus(); }

  get size() { return { rows: this.term.rows, cols: this.term.cols }; }

  /** The first visible line of the scrollback (0 = the oldest), to keep it across DOM moves. */
  get viewportY() { return this.term.buffer.active.viewportY; }

  get atBottom() {
    const b = this.term.buffer.active;
    return b.viewportY >= b.baseY;
  }

  scrollTo(line) { this.term.scrollToLine(line); }

  scrollToBottom() { this.term.scrollToBottom(); }

  /** Text of the buffer's lines (scrollback included), for the tests and debugging. */
  lines(from = 0, to = Infinity) {
    const b = this.term.buffer.active;
    const out = [];
    for (let y = from; y < Math.min(b.length, to); y++) out.push(b.getLine(y)?.translateToString(true) ?? "");
    return out;
  }
}
