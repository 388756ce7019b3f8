// Building the page's elements: el("button", {class: "x", onclick: fn}, "text", child...), one
// builder for every view, so they all read attributes, listeners and children the same way.

function build(tag, attrs, children, props) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value == null || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (props && key in node && typeof value !== "string") node[key] = value;
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child == null || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

/** Build an element: `on…` keys are listeners, `class` and `dataset` what they say, the rest
 * attributes (`true` an empty one); null and false values and children are left out. */
export function el(tag, attrs = {}, ...children) {
  return build(tag, attrs, children, false);
}

/** As `el`, but a value that is not a string, for a property the element has, sets that
 * property (the cards' builder: they pass objects and numbers to properties). */
export function h(tag, attrs = {}, ...children) {
  return build(tag, attrs, children, true);
}
