// Telling the user a pane needs them: the tab title's count, browser notifications (for the
// server's own notification events, which already respect its cooldown), an optional sound.

const SOUND_KEY = "panewatch.sound";
const NOTIFY_KEY = "panewatch.notifications";
const BASE_TITLE = "Panewatch";

export function setBlockedCount(count) {
  document.title = count > 0 ? `(${count}) ${BASE_TITLE}` : BASE_TITLE;
}

function notificationsSupported() {
  return typeof window.Notification === "function";
}

export class Alerts {
  /**
   * @param {object} els {notifyButton, notifySwitch, notifyOn, soundToggle, lastAlert, lastAlertLine}
   * @param {function} focusSession called with a session id when a notification is clicked
   */
  constructor({ notifyButton, notifySwitch, notifyOn, soundToggle, lastAlert, lastAlertLine }, focusSession) {
    this.notifyButton = notifyButton;
    this.notifySwitch = notifySwitch;
    this.notifyOn = notifyOn;
    this.soundToggle = soundToggle;
    this.lastAlert = lastAlert;
    this.lastAlertLine = lastAlertLine;
    this.focusSession = focusSession;
    this.audio = null;
    this.shown = 0;

    this.soundToggle.checked = localStorage.getItem(SOUND_KEY) === "on";
    this.soundToggle.addEventListener("change", () => {
      localStorage.setItem(SOUND_KEY, this.soundToggle.checked ? "on" : "off");
      if (this.soundToggle.checked) this.beep(); // a user gesture: unlocks audio, and a preview
    });
    this.notifyButton.addEventListener("click", () => this.askPermission());
    // once allowed, notifications are switched on and off here (the browser has no "revoke")
    this.notifyOn.checked = localStorage.getItem(NOTIFY_KEY) !== "off";
    this.notifyOn.addEventListener("change", () => {
      localStorage.setItem(NOTIFY_KEY, this.notifyOn.checked ? "on" : "off");
    });
    this.renderPermission();
  }

  renderPermission() {
    const b = this.notifyButton;
    if (!notificationsSupported()) {
      b.disabled = true;
      b.textContent = "Notifications unavailable";
      b.title = window.isSecureContext
        ? "This browser has no Notification API"
        : "Browsers allow notifications only on https:// or localhost pages";
      return;
    }
    const p = Notification.permission;
    b.dataset.permission = p;
    b.disabled = p !== "default";
    b.hidden = p === "granted";
    this.notifySwitch.hidden = p !== "granted";
    const labels = { granted: "Notifications on", denied: "Notifications blocked" };
    b.textContent = labels[p] || "Enable notifications";
    b.title = p === "denied" ? "Allow notifications for this site in the browser's settings" : "";
  }

  async askPermission() {
    if (!notificationsSupported()) return;
    try {
      await Notification.requestPermission();
    } catch {
      // older browsers take a callback; the permission is read again below either way
    }
    this.renderPermission();
  }

  /** A `{"type":"notification"}` event from /ws/state. */
  notify(event) {
    const when = new Date((event.at || Date.now() / 1000) * 1000).toLocaleTimeString();
    this.lastAlert.textContent = `Last alert: ${event.title} — ${when}`;
    this.lastAlertLine.hidden = false;
    this.lastAlert.dataset.session = event.session || "";
    if (notificationsSupported() && Notification.permission === "granted" && this.notifyOn.checked) {
      try {
        const n = new Notification(event.title, {
          body: event.body,
          tag: `panewatch:${event.session}:${event.kind === "desktop" ? "desktop" : event.state}`,
        });
        this.shown += 1;
        n.onclick = () => {
          window.focus();
          this.focusSession(event.session);
          n.close();
        };
      } catch {
        // e.g. Android Chrome only notifies from a service worker; the page shows it anyway
      }
    }
    if (this.soundToggle.checked && event.state === "blocked" && event.kind !== "desktop") this.beep();
  }

  /** A desktop notification the agent raised (OSC 9/99/777, `kind: "desktop"`): its last one,
   * as a line on its card, under the state's reason. The text arrives cleaned; it is set as
   * text, never as HTML. */
  showAgentMessage(event) {
    const card = document.getElementById(`card-${event.session}`);
    if (!card) return;
    let line = card.querySelector(".agent-message");
    if (!line) {
      line = document.createElement("p");
      line.className = "agent-message";
      const why = card.querySelector(".why");
      if (why) why.after(line);
      else card.querySelector(".card-head")?.after(line);
    }
    const when = new Date((event.at || Date.now() / 1000) * 1000).toLocaleTimeString();
    line.textContent = `🔔 ${event.body || event.title}`;
    line.title = `${event.protocol} notification from the agent, ${when}`;
  }

  /** A session was deleted: an alert about it points nowhere now. */
  forget(id) {
    if (this.lastAlert.dataset.session === id) {
      this.lastAlertLine.hidden = true;
      this.lastAlert.textContent = "";
      delete this.lastAlert.dataset.session;
    }
  }

  beep() {
    try {
      this.audio ??= new AudioContext();
      const ctx = this.audio;
      const osc = ctx.createOscillator();
      const gain = ctx.createGain();
      osc.type = "sine";
      osc.frequency.value = 880;
      gain.gain.setValueAtTime(0.0001, ctx.currentTime);
      gain.gain.exponentialRampToValueAtTime(0.2, ctx.currentTime + 0.02);
      gain.gain.exponentialRampToValueAtTime(0.0001, ctx.currentTime + 0.35);
      osc.connect(gain).connect(ctx.destination);
      osc.start();
      osc.stop(ctx.currentTime + 0.4);
    } catch {
      // no audio device: the sound is optional
    }
  }
}
