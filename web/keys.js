// The page's keys (listed in index.html's `?` dialog and the README). They act only on the page:
// a key pressed inside a terminal is the pane's (xterm.js has it; only the release key, handled
// in term.js, comes back), and one typed into a text field is that field's.

function inTerminal(target) {
  return target instanceof Element && Boolean(target.closest(".xterm"));
}

function inTextField(target) {
  if (!(target instanceof Element)) return false;
  if (target.isContentEditable) return true;
  if (target instanceof HTMLTextAreaElement || target instanceof HTMLSelectElement) return true;
  return target instanceof HTMLInputElement && !["checkbox", "radio", "button", "submit", "reset"].includes(target.type);
}

/**
 * @param {object} a the page's actions: active(), next(delta), edge(last), nextWaiting(delta),
 *   enter(), toggle(), choose(digit) -> bool, escape() -> bool, filter(), clearFilter() -> bool,
 *   help(), cycleGroup(), toggleFit(), toggleLayout()
 */
export function installKeys(a) {
  document.addEventListener("keydown", (e) => {
    if (e.defaultPrevented || e.isComposing) return;
    const t = e.target;
    if (inTerminal(t)) return; // every key in a terminal is the pane's
    if (document.querySelector("dialog[open]")) return; // the dialog has the keyboard (Esc closes it)
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (inTextField(t)) {
      // Esc in the filter clears it and goes back to the list
      if (e.key === "Escape" && t.id === "filter") {
        e.preventDefault();
        a.clearFilter();
        t.blur();
        a.next(0);
      } else if ((e.key === "ArrowDown" || e.key === "Enter") && t.id === "filter") {
        e.preventDefault();
        t.blur();
        a.next(0);
      }
      return;
    }
    if (e.key === "?") {
      e.preventDefault();
      a.help();
      return;
    }
    if (!a.active()) return;
    const onButton = t instanceof HTMLButtonElement || t instanceof HTMLAnchorElement;
    let done = true;
    switch (e.key) {
      case "j":
      case "ArrowDown":
        a.next(1);
        break;
      case "k":
      case "ArrowUp":
        a.next(-1);
        break;
      case "Home":
        a.edge(false);
        break;
      case "End":
        a.edge(true);
        break;
      case "n":
        a.nextWaiting(1);
        break;
      case "N":
        a.nextWaiting(-1);
        break;
      case "o":
        a.toggle();
        break;
      case "/":
        a.filter();
        break;
      case "g":
        a.cycleGroup();
        break;
      case "f":
        a.toggleFit();
        break;
      case "v":
        a.toggleLayout();
        break;
      case "Enter":
        // on a button Enter is that button's (the row's own button enters its terminal)
        if (onButton) done = false;
        else a.enter();
        break;
      case "Escape":
        done = a.escape() || a.clearFilter();
        break;
      default:
        if (/^[1-9]$/.test(e.key)) done = a.choose(e.key);
        else done = false;
    }
    if (done) e.preventDefault();
  });
}
