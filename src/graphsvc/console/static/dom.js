// Building the page. Every value is added as text (a text node or an attribute set by
// name): names in the graph come from collected data, which an attacker may have chosen.

const SVG_NS = "http://www.w3.org/2000/svg";

function fill(node, attrs, children) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      node.addEventListener(name.slice(2), value);
    } else if (name === "dataset") {
      Object.assign(node.dataset, value);
    } else {
      node.setAttribute(name, value === true ? "" : String(value));
    }
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** An HTML element: el("a", {href: "#/x"}, "text", otherNode). */
export function el(tag, attrs, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

/** Children added to a node as `el` adds them (strings as text; null and false skipped). */
export function append(node, children) {
  return fill(node, {}, [children]);
}

/** An SVG element, the same way. */
export function svg(tag, attrs, ...children) {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}

export function clear(node) {
  node.replaceChildren();
  return node;
}

/** A table of rows: columns are [heading, row => value or node]. */
export function table(columns, rows, attrs = {}) {
  return el(
    "table",
    attrs,
    el("thead", {}, el("tr", {}, columns.map(([heading]) => el("th", {}, heading)))),
    el(
      "tbody",
      {},
      rows.map((row) => el("tr", {}, columns.map(([, cell]) => el("td", {}, cell(row))))),
    ),
  );
}

export function formatTime(value) {
  if (!value) return "";
  const when = new Date(value);
  if (Number.isNaN(when.getTime()) || when.getUTCFullYear() < 2) return "never";
  return when.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

export function formatNumber(value) {
  if (typeof value !== "number") return String(value ?? "");
  return Number.isInteger(value) ? value.toLocaleString("en") : value.toFixed(2);
}

/** The reference's nullable wrappers ({string, valid}, {time, valid}...) as plain values. */
export function unwrap(value) {
  if (value && typeof value === "object" && "valid" in value) {
    if (!value.valid) return null;
    const inner = Object.keys(value).find((key) => key !== "valid");
    return value[inner];
  }
  return value;
}

/** A message box: an error or a note, as text. */
export function notice(text, kind = "error") {
  return el("p", { class: `notice ${kind}`, role: kind === "error" ? "alert" : "status" }, text);
}

/**
 * Paging of a list of `count` rows shown `size` at a time from `skip`: the rows shown and
 * Previous and Next buttons, which call `go` with the skip of the page they open.
 */
export function pager(count, skip, size, go) {
  const last = Math.min(skip + size, count);
  const previous = el("button", { type: "button", class: "page-previous", disabled: skip === 0 }, "Previous");
  const next = el("button", { type: "button", class: "page-next", disabled: last >= count }, "Next");
  previous.addEventListener("click", () => go(Math.max(0, skip - size)));
  next.addEventListener("click", () => go(skip + size));
  const range = count ? `${formatNumber(skip + 1)}–${formatNumber(last)} of ${formatNumber(count)}` : "none";
  return el("div", { class: "pager" }, el("span", { class: "muted page-range" }, range), " ", previous, " ", next);
}
