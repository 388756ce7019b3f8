// A pane as a real terminal: xterm.js fed by /ws/sessions/{id}/term (scrollback, then an exact
// repaint, then live bytes), the user's keystrokes sent back as xterm.js encodes them, and
// resizes asked of the server (which resizes the pane; every page then follows its size).
//
// It fits its container one of two ways: "pane" keeps the pane's size and scales the font until
// every column (and, in a container of fixed height, every row) shows, never clipped; "view"
// keeps a readable font and resizes the pane to what fits (the agent gets SIGWINCH; the size it
// had comes back when the view lets go). Tab never reaches it from the page: focus enters it
// only by a click or an explicit action, and once inside, every key is the pane's but the
// release key (Ctrl+]), which hands focus back to the page.

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
// Keys typed while the channel is still opening (a card just opened, the page just loaded) are
// kept, up to this much, and sent as soon as it is up: a connection slower than the typist
// loses nothing. Once the channel has been up, keys typed while it is down are refused as before.
const TYPE_AHEAD_MAX = 64 * 1024;

export const SCROLLBACK = 10000;

const PHONE = matchMedia("(max-width: 600px)");
/** The font of "fit to view" (and the largest one "fit to pane" scales up to). */
const viewFont = () => (PHONE.matches ? 11 : 12);
const MAX_FONT = 14;
const MIN_FONT = 3;
const FONT_STEP = 0.25;
// the width xterm.js keeps for its scrollbar beside the rows
const SCROLLBAR = 14;

/** The key that takes focus out of a terminal back to the page (every other key is the pane's). */
export const RELEASE_KEY = "Ctrl+]";
export function isReleaseKey(e) {
  return e.ctrlKey && !e.altKey && !e.metaKey && (e.key === "]" || e.code === "BracketRight" || e.key === "\u001d");
}

export class TermView {
  /** The page's role may not type (a viewer): keys, held-back keys and resizes are not sent. */
  static readOnly = false;

  /**
   * @param {string} id the session id
   * @param {object} handlers
   *   onState(msg)      {state, rule, source, why, since, title, prompt, exit_code}
   *   onHeld(msg)       keys were held back ({bytes}); onReleased({sent, bytes})
   *   onError(detail)   the server refused a message
   *   onTitle(title)    the agent set the terminal title
   *   onLoaded()        the screen is drawn (after each (re)connect)
   *   onUp(), onDown()  the channel's connection
   *   onRelease()       the user pressed the release key: the page takes focus back
   *   onFocus(inside)   the terminal took or lost the keyboard
   * @param {object} options
   *   fill   the container has a height of its own: fit the rows to it too
   *   fit    "pane" (scale the font) or "view" (resize the pane)
   */
  constructor(id, handlers, { fill = false, fit = "pane" } = {}) {
    this.id = id;
    this.handlers = handlers;
    this.fill = fill;
    this.fitMode = fit;
    this.sizeBefore = null; // the pane's size before "fit to view" changed it
    this.loaded = false;
    this.userAt = -Infinity;
    this.typeAhead = []; // keys typed before the channel first came up (null once it has)
    this.host = document.createElement("div");
    this.host.className = "term-host";
    this.term = new Terminal({
      rows: 24, cols: 80, scrollback: SCROLLBACK, fontSize: viewFont(),
      fontFamily: '"DejaVu Sans Mono", "Cascadia Mono", Menlo, Consolas, "Liberation Mono", monospace',
      theme: THEME, allowProposedApi: false, cursorBlink: false, convertEol: false,
      drawBoldTextInBrightColors: false,
    });
    this.fit = new FitAddon();
    this.term.loadAddon(this.fit);
    this.term.onData((data) => this.typed(data));
    this.term.onBinary((data) => this.typed(data));
    this.term.onTitleChange((title) => this.handlers.onTitle?.(title));
    this.term.attachCustomKeyEventHandler((e) => {
      if (!isReleaseKey(e)) return true;
      e.preventDefault();
      if (e.type === "keydown") this.releaseFocus();
      return false; // never the pane's
    });
    const mark = () => { this.userAt = performance.now(); };
    for (const type of USER_EVENTS) this.host.addEventListener(type, mark, true);
    this.opened = false;
    this.socket = new LiveSocket(`/ws/sessions/${encodeURIComponent(id)}/term`, {
      onMessage: (msg) => this.onMessage(msg),
      onBinary: (buffer) => { if (!this.disposed) this.term.write(new Uint8Array(buffer)); },
      onUp: () => { this.sendTypeAhead(); this.handlers.onUp?.(); },
      onDown: () => this.handlers.onDown?.(),
    }, { minDelay: 500, maxDelay: 10000, finalCodes: [4404] });
  }

  /** Attach to the page (xterm.js measures its font, so the host must be in the document). */
  open() {
    if (this.opened || !this.host.isConnected) return;
    this.opened = true;
    this.term.open(this.host);
    const input = this.term.textarea;
    if (input) {
      input.tabIndex = -1; // not a Tab stop: entering the terminal is explicit
      input.setAttribute("aria-keyshortcuts", "Control+BracketRight");
      input.addEventListener("focus", () => { this.host.classList.add("term-focused"); this.handlers.onFocus?.(true); });
      input.addEventListener("blur", () => { this.host.classList.remove("term-focused"); this.handlers.onFocus?.(false); });
    }
    // Chromium makes a scrolling box a Tab stop of its own: not these
    for (const el of this.host.querySelectorAll(".xterm-viewport, .xterm-scrollable-element")) el.tabIndex = -1;
    this.observer = new ResizeObserver(() => this.scheduleFit());
    this.observer.observe(this.host);
    this.scheduleFit();
  }

  /** Give the keyboard back to the page (the release key, or the page asking). */
  releaseFocus() {
    this.term.blur();
    this.term.textarea?.blur();
    this.handlers.onRelease?.();
  }

  get focused() {
    return Boolean(this.term.textarea && document.activeElement === this.term.textarea);
  }

  // -- fitting the container ----------------------------------------------------------------------
  /** "pane": keep the pane's size, scale the font; "view": a readable font, the pane resized. */
  setFit(mode, { fill = this.fill } = {}) {
    const was = this.fitMode;
    this.fitMode = mode;
    this.fill = fill;
    if (was === "view" && mode !== "view") this.restoreSize();
    if (mode === "view" && this.opened) this.term.options.fontSize = viewFont();
    this.scheduleFit();
  }

  scheduleFit() {
    if (this.fitFrame || this.disposed) return;
    this.fitFrame = requestAnimationFrame(() => {
      this.fitFrame = null;
      this.fitNow();
    });
  }

  fitNow() {
    if (!this.opened || this.disposed || !this.host.isConnected || !this.host.clientWidth) return;
    if (this.fitMode === "view") this.fitView();
    else this.fitFont();
  }

  cell() {
    const c = this.term._core?._renderService?.dimensions?.css?.cell; // pinned with the vendored version
    return c && c.width > 0 && c.height > 0 ? c : null;
  }

  /** The largest font (up to MAX_FONT) at which every column, and with `fill` every row, shows. */
  fitFont() {
    let cell = this.cell();
    if (!cell) return;
    const width = this.host.clientWidth - SCROLLBAR;
    const height = this.fill ? this.host.clientHeight : Infinity;
    const { cols, rows } = this.term;
    const fits = (c) => c.width * cols <= width && (!this.fill || c.height * rows <= height);
    let size = this.term.options.fontSize;
    const guess = Math.min(MAX_FONT, size * width / (cell.width * cols), size * height / (cell.height * rows));
    const next = Math.max(MIN_FONT, Math.floor(guess / FONT_STEP) * FONT_STEP);
    if (next !== size) {
      size = next;
      this.term.options.fontSize = size;
      cell = this.cell() || cell;
    }
    // cells are whole device pixels: step down until it really fits
    for (let i = 0; i < 12 && !fits(cell) && size > MIN_FONT; i++) {
      size = Math.max(MIN_FONT, size - FONT_STEP);
      this.term.options.fontSize = size;
      cell = this.cell() || cell;
    }
    this.host.dataset.font = String(size);
  }

  /** Resize the pane to what the container holds at the readable font (after a pause: a drag of
   * the window must not send a resize for every pixel). */
  fitView() {
    if (this.term.options.fontSize !== viewFont()) this.term.options.fontSize = viewFont();
    this.host.dataset.font = String(viewFont());
    clearTimeout(this.viewTimer);
    this.viewTimer = setTimeout(() => {
      if (this.fitMode !== "view" || this.disposed) return;
      const size = this.proposeSize();
      if (!size || (size.rows === this.term.rows && size.cols === this.term.cols)) return;
      if (!this.sizeBefore) this.sizeBefore = this.size;
      this.resizePane(size.rows, size.cols);
    }, 150);
  }

  /** The pane back at the size it had before "fit to view" (when nothing else changed it). */
  restoreSize() {
    clearTimeout(this.viewTimer);
    const before = this.sizeBefore;
    this.sizeBefore = null;
    if (before && (before.rows !== this.term.rows || before.cols !== this.term.cols)) {
      this.resizePane(before.rows, before.cols);
    }
  }

  start() { this.socket.start(); }

  stop() { this.socket.stop(); }

  dispose() {
    this.restoreSize();
    this.disposed = true;
    cancelAnimationFrame(this.fitFrame);
    this.observer?.disconnect();
    this.socket.stop();
    this.term.dispose();
  }

  onMessage(msg) {
    if (this.disposed) return;
    switch (msg.type) {
      case "hello":
        this.loaded = false;
        this.term.reset();
        this.term.resize(msg.cols, msg.rows);
        this.scheduleFit();
        break;
      case "ready":
        // written once xterm.js has parsed everything before it
        this.term.write("", () => {
          if (this.disposed) return;
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
        this.scheduleFit();
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

  /** Data xterm.js emitted: the user's keys go to the pane; its own replies do not (nor a
   * viewer's keys: the server would close the terminal with 4403). */
  typed(data) {
    if (TermView.readOnly) return;
    if (performance.now() - this.userAt > USER_WINDOW_MS) return;
    if (TERMINAL_REPLY.test(data)) return;
    if (this.typeAhead && this.typeAhead.join("").length + data.length <= TYPE_AHEAD_MAX) {
      this.typeAhead.push(data); // the channel is still opening: sent once it is up
      return;
    }
    if (!this.socket.send({ type: "input", data })) this.handlers.onError?.("not connected: the keys were not sent");
  }

  /** The channel came up: the keys typed while it was opening go first, in order. */
  sendTypeAhead() {
    const keys = this.typeAhead;
    this.typeAhead = null;
    for (const data of keys || []) this.socket.send({ type: "input", data });
  }

  /** The held-back keys: send them after all, or drop them. */
  release(send) {
    if (TermView.readOnly) return false;
    return this.socket.send({ type: "release", send });
  }

  /** Ask the server to resize the pane (all its terminals follow); never for a viewer. */
  resizePane(rows, cols) {
    if (TermView.readOnly) return false;
    return this.socket.send({ type: "resize", rows, cols });
  }

  /** The size that fills the host element now, or null before the terminal is drawn. */
  proposeSize() {
    const dims = this.fit.proposeDimensions();
    if (!dims || !Number.isFinite(dims.rows) || !Number.isFinite(dims.cols)) return null;
    return { rows: Math.max(2, Math.min(500, dims.rows)), cols: Math.max(10, Math.min(1000, dims.cols)) };
  }

  focus() { this.term.focus(); }

  /** The pane's columns all show: the rows' drawn width fits in the container (for the tests). */
  get clipped() {
    const screen = this.host.querySelector(".xterm-screen");
    if (!screen) return null;
    return screen.getBoundingClientRect().right > this.host.getBoundingClientRect().right + 0.5;
  }

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
