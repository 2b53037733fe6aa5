// A path graph drawn as SVG: nodes (a box with a disc of their kind and their name) in
// columns by their distance from the start (every shortest path runs left to right),
// ordered in each column to cross fewer edges; an arrow per edge, its kind shown when the
// pointer is on it; zoomed and panned through the viewBox.

import { el, svg } from "./dom.js";
import { segmentOf } from "./entity.js";

const ROW = 32; // between the middles of two nodes of a column
const HIGH = 22; // a node's box: a disc of its kind, then its name
const DISC = 8;
const GAP = 90; // between two columns' boxes, more for a column of many nodes...
const GAP_PER_NODE = 4;
const MOST_GAP = 200; // ...up to this
const MARGIN = 24;
const BEND = 14; // how far apart parallel edges bow
// Names are set in an 11-unit monospace font (console.css), CHAR units a character: a
// box holds its name whole up to LABEL characters, a longer one cut short, so that no name
// overflows its box, and no box overlaps another.
const CHAR = 6.8;
const LABEL = 26;
const SWEEPS = 8; // of the barycenter ordering
const KIND_CLASSES = ["User", "Group", "Computer", "Domain", "GPO", "OU", "Container"];
let drawings = 0; // each drawing's marker ids are its own

function kindClass(kinds) {
  const known = (kinds || []).find((kind) => KIND_CLASSES.includes(kind));
  return known ? `kind-${known.toLowerCase()}` : "kind-other";
}

export function shorten(name, length = LABEL) {
  return name.length > length ? `${name.slice(0, length - 1)}…` : name;
}

/** Each node's distance from the start over the answer's edges: its column. */
export function distances(graph, start) {
  return distancesFrom(graph, [start]);
}

/** Each node's distance from the nearest of several starts (paths between sets). */
export function distancesFrom(graph, starts, shown = () => true) {
  const outgoing = new Map(Object.keys(graph.nodes).map((id) => [id, []]));
  for (const edge of graph.edges) if (shown(edge)) outgoing.get(edge.source)?.push(edge.target);
  const column = new Map(starts.map((start) => [start, 0]));
  const queue = [...starts];
  while (queue.length) {
    const id = queue.shift();
    for (const next of outgoing.get(id) || []) {
      if (!column.has(next)) {
        column.set(next, column.get(id) + 1);
        queue.push(next);
      }
    }
  }
  return column;
}

/** The edges between neighbouring columns that cross, the columns in this order. */
export function crossings(layers, graph, layerOf) {
  const position = new Map(layers.flatMap((layer) => layer.map((id, index) => [id, index])));
  const spans = layers.map(() => []);
  for (const edge of graph.edges) {
    const [a, b] = [layerOf(edge.source), layerOf(edge.target)];
    if (Math.abs(a - b) !== 1) continue;
    const [left, right] = a < b ? [edge.source, edge.target] : [edge.target, edge.source];
    spans[Math.min(a, b)].push([position.get(left), position.get(right)]);
  }
  let count = 0;
  for (const between of spans) {
    for (let i = 0; i < between.length; i++) {
      for (let j = i + 1; j < between.length; j++) {
        const [p, q] = [between[i], between[j]];
        if ((p[0] - q[0]) * (p[1] - q[1]) < 0) count++;
      }
    }
  }
  return count;
}

/**
 * Where each node goes: columns by `column` (a node it lacks goes in the first), each
 * column ordered by name, then by sweeps of the barycenter heuristic (a node moves to the
 * mean place of its neighbours in the column before, then after), the order with fewest
 * crossings kept. The gap after a column grows with the larger of the two it separates.
 */
export function layout(graph, column) {
  const ids = Object.keys(graph.nodes);
  const longest = Math.max(4, ...ids.map((id) => shorten(graph.nodes[id].label || graph.nodes[id].objectId).length));
  const wide = Math.ceil(DISC * 2 + 14 + longest * CHAR);
  const layerOf = (id) => column.get(id) ?? 0;
  const layers = [];
  for (const id of ids) (layers[layerOf(id)] ||= []).push(id);
  for (let at = 0; at < layers.length; at++) layers[at] ||= [];
  const name = (id) => graph.nodes[id].label || "";
  for (const layer of layers) layer.sort((a, b) => name(a).localeCompare(name(b)) || a.localeCompare(b));
  const neighbours = new Map(ids.map((id) => [id, []]));
  for (const edge of graph.edges) {
    if (edge.source === edge.target) continue;
    neighbours.get(edge.source)?.push(edge.target);
    neighbours.get(edge.target)?.push(edge.source);
  }
  // A node's place: its rank off its column's middle, columns being centred.
  const place = new Map();
  const renumber = (layer) => layer.forEach((id, index) => place.set(id, index - (layer.length - 1) / 2));
  layers.forEach(renumber);
  const sweep = (layer, side) => {
    const key = new Map();
    for (const id of layer) {
      const next = neighbours.get(id).filter((other) => layerOf(other) === side);
      key.set(id, next.length ? next.reduce((sum, other) => sum + place.get(other), 0) / next.length : place.get(id));
    }
    layer.sort((a, b) => key.get(a) - key.get(b) || place.get(a) - place.get(b));
    renumber(layer);
  };
  let best = layers.map((layer) => layer.slice());
  let fewest = crossings(layers, graph, layerOf);
  for (let pass = 0; pass < SWEEPS && fewest > 0; pass++) {
    for (let at = 1; at < layers.length; at++) sweep(layers[at], at - 1);
    for (let at = layers.length - 2; at >= 0; at--) sweep(layers[at], at + 1);
    const count = crossings(layers, graph, layerOf);
    if (count < fewest) [best, fewest] = [layers.map((layer) => layer.slice()), count];
  }
  const rows = Math.max(...best.map((layer) => layer.length), 1);
  const height = MARGIN * 2 + HIGH + (rows - 1) * ROW;
  const xs = [MARGIN + wide / 2];
  for (let at = 1; at < best.length; at++) {
    const most = Math.max(best[at - 1].length, best[at].length);
    xs.push(xs[at - 1] + wide + Math.min(MOST_GAP, GAP + GAP_PER_NODE * most));
  }
  const at = new Map();
  best.forEach((layer, index) => {
    const top = (height - (layer.length - 1) * ROW) / 2;
    layer.forEach((id, rank) => at.set(id, { x: xs[index], y: top + rank * ROW }));
  });
  return { at, wide, width: xs[xs.length - 1] + wide / 2 + MARGIN, height, crossings: fewest };
}

function edgeDrawing(edge, index, graph, at, wide, between, marker) {
  const from = at.get(edge.source);
  const to = at.get(edge.target);
  // From the side of the source's box facing the target to the target's facing the source;
  // within a column, from one right side to the other, bowing out.
  const half = wide / 2;
  const same = Math.abs(to.x - from.x) < 1;
  const sign = same || to.x > from.x ? 1 : -1;
  const [x1, y1] = [from.x + sign * half, from.y];
  const [x2, y2] = [to.x + (same ? half + 4 : -sign * (half + 3)), to.y];
  // Edges between the same two nodes (AdminTo and CanPSRemote, say) bow apart, each its own way.
  const siblings = between.get([edge.source, edge.target].sort().join(" "));
  const bend = (siblings.indexOf(edge) - (siblings.length - 1) / 2) * BEND + (same ? 40 + Math.abs(y2 - y1) / 4 : 0);
  const length = Math.hypot(x2 - x1, y2 - y1) || 1;
  const [dx, dy] = [(x2 - x1) / length, (y2 - y1) / length];
  const [nx, ny] = same ? [1, 0] : [-dy, dx];
  const [cx, cy] = [(x1 + x2) / 2 + nx * bend * 2, (y1 + y2) / 2 + ny * bend * 2];
  const [mx, my] = [(x1 + x2) / 2 + nx * bend, (y1 + y2) / 2 + ny * bend];
  const d = `M ${x1.toFixed(1)} ${y1.toFixed(1)} Q ${cx.toFixed(1)} ${cy.toFixed(1)} ${x2.toFixed(1)} ${y2.toFixed(1)}`;
  const [source, target] = [graph.nodes[edge.source], graph.nodes[edge.target]];
  return svg(
    "g",
    { class: "edge", "data-kind": edge.kind, "data-index": index, "data-from": source.objectId, "data-to": target.objectId, "data-mx": mx.toFixed(1), "data-my": my.toFixed(1) },
    svg("path", { class: "line", d, "marker-end": `url(#${marker})` }),
    svg("path", { class: "hit", d }),
    svg("title", {}, `${source.label} —${edge.kind}→ ${target.label}`),
  );
}

function nodeDrawing(id, node, place, wide, starts, ends) {
  const kinds = node.kinds || [node.kind];
  const marks = [node.isTierZero ? "Tier Zero" : null, node.isOwnedObject ? "Owned" : null].filter(Boolean);
  const classes = ["node", kindClass(kinds), starts.has(id) && "start", ends.has(id) && "end", node.isTierZero && "tier-zero", node.isOwnedObject && "owned"];
  const segment = segmentOf(kinds);
  const [left, top] = [place.x - wide / 2, place.y - HIGH / 2];
  const drawing = [
    node.isTierZero ? svg("rect", { class: "tier-ring", x: left - 3, y: top - 3, width: wide + 6, height: HIGH + 6, rx: HIGH / 2 + 3 }) : null,
    svg("rect", { class: "box", x: left, y: top, width: wide, height: HIGH, rx: HIGH / 2 }),
    svg("circle", { class: "disc", cx: left + HIGH / 2, cy: place.y, r: DISC }),
    svg("text", { class: "node-kind", x: left + HIGH / 2, y: place.y + 3, "text-anchor": "middle" }, (node.kind || "?").slice(0, 2)),
    node.isOwnedObject ? svg("circle", { class: "owned-mark", cx: left + HIGH / 2 + 7, cy: top + 3, r: 4 }) : null,
    svg("text", { class: "node-label", x: left + HIGH + 4, y: place.y + 4 }, shorten(node.label || node.objectId)),
    svg("title", {}, `${node.kind}: ${node.label}\n${node.objectId}${marks.length ? `\n${marks.join(", ")}` : ""}`),
  ];
  return svg(
    "g",
    { class: classes.filter(Boolean).join(" "), "data-object-id": node.objectId, "data-id": id, "data-x": place.x, "data-y": place.y },
    segment ? svg("a", { href: `#/entity/${segment}/${encodeURIComponent(node.objectId)}`, class: "node-link" }, drawing) : drawing,
  );
}

/** The kind of the edge under the pointer, written by it on a box above the drawing. */
function hoverLabel(drawing) {
  const text = svg("text", { class: "edge-hover-text", "text-anchor": "middle" });
  const box = svg("rect", { class: "edge-hover-box", rx: 4 });
  const label = svg("g", { class: "edge-hover", visibility: "hidden", "aria-hidden": "true" }, box, text);
  let hovered = null;
  const hide = () => {
    hovered?.classList.remove("hovered");
    hovered = null;
    label.setAttribute("visibility", "hidden");
  };
  drawing.addEventListener("pointerover", (event) => {
    const edge = event.target.closest?.(".edge");
    if (!edge) return hide();
    if (edge === hovered) return;
    hide();
    hovered = edge;
    edge.classList.add("hovered");
    const [x, y] = [Number(edge.dataset.mx), Number(edge.dataset.my)];
    text.textContent = edge.dataset.kind;
    text.setAttribute("x", x);
    text.setAttribute("y", y - 8);
    const width = text.getComputedTextLength() + 12;
    for (const [name, value] of Object.entries({ x: x - width / 2, y: y - 23, width, height: 20 })) box.setAttribute(name, value);
    label.setAttribute("visibility", "visible");
  });
  drawing.addEventListener("pointerleave", hide);
  return label;
}

/** Zoom (the wheel, around the pointer; buttons; + and - keys) and pan (a drag; the
 * arrow keys) of a drawing, through its viewBox; Fit (or 0) shows it whole again. */
function zoomable(drawing, width, height) {
  const whole = { x: 0, y: 0, w: width, h: height };
  let view = { ...whole };
  const show = (next) => {
    view = next;
    drawing.setAttribute("viewBox", [next.x, next.y, next.w, next.h].map((v) => Number(v.toFixed(2))).join(" "));
  };
  // Zoomed by `factor` (>1 nearer) about a point of the drawing.
  const zoom = (factor, px = view.x + view.w / 2, py = view.y + view.h / 2) => {
    const w = Math.min(whole.w * 4, Math.max(whole.w / 25, view.w / factor));
    const k = view.w / w;
    show({ x: px - (px - view.x) / k, y: py - (py - view.y) / k, w, h: view.h / k });
  };
  const pan = (dx, dy) => show({ ...view, x: view.x + dx, y: view.y + dy });
  const fit = () => show({ ...whole });
  const pointAt = (clientX, clientY) => new DOMPoint(clientX, clientY).matrixTransform(drawing.getScreenCTM().inverse());
  drawing.addEventListener(
    "wheel",
    (event) => {
      event.preventDefault();
      const lines = event.deltaMode === 1 ? 16 : event.deltaMode === 2 ? 400 : 1;
      const point = pointAt(event.clientX, event.clientY);
      zoom(Math.exp(-event.deltaY * lines * 0.002), point.x, point.y);
    },
    { passive: false },
  );
  let drag = null;
  let dragged = false;
  drawing.addEventListener("pointerdown", (event) => {
    if (event.button !== 0) return;
    drag = { id: event.pointerId, x: event.clientX, y: event.clientY, view: { ...view }, scale: drawing.getScreenCTM().a };
    dragged = false;
  });
  drawing.addEventListener("pointermove", (event) => {
    if (!drag || event.pointerId !== drag.id) return;
    const [dx, dy] = [event.clientX - drag.x, event.clientY - drag.y];
    if (!dragged && Math.hypot(dx, dy) < 4) return;
    if (!dragged) drawing.setPointerCapture(event.pointerId); // a click stays a click
    dragged = true;
    drawing.classList.add("dragging");
    show({ ...drag.view, x: drag.view.x - dx / drag.scale, y: drag.view.y - dy / drag.scale });
  });
  const drop = () => {
    drag = null;
    drawing.classList.remove("dragging");
  };
  drawing.addEventListener("pointerup", drop);
  drawing.addEventListener("pointercancel", drop);
  // A drag that began on a node's link does not follow it.
  drawing.addEventListener("click", (event) => {
    if (dragged) event.preventDefault();
    dragged = false;
  }, true);
  drawing.addEventListener("keydown", (event) => {
    const step = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] }[event.key];
    if (step) pan(step[0] * view.w * 0.1, step[1] * view.h * 0.1);
    else if (event.key === "+" || event.key === "=") zoom(1.25);
    else if (event.key === "-") zoom(0.8);
    else if (event.key === "0") fit();
    else return;
    event.preventDefault();
  });
  const button = (cls, text, label, act) => el("button", { type: "button", class: cls, "aria-label": label, title: label, onclick: act }, text);
  fit();
  return el(
    "div",
    { class: "graph-tools", role: "toolbar", "aria-label": "zoom" },
    button("zoom-in", "+", "Zoom in", () => zoom(1.25)),
    button("zoom-out", "−", "Zoom out", () => zoom(0.8)),
    button("zoom-fit", "Fit", "Show the whole drawing", fit),
    el("span", { class: "muted hint" }, "Wheel to zoom, drag to pan; point at an edge for its kind."),
  );
}

/**
 * The drawing of a graph ({nodes: {id: {label, kind, kinds, objectId}}, edges: [{source,
 * target, kind}]}), its columns by `column` (a node's distance from the start). Returns the
 * view (zoom buttons and the SVG) and the SVG, whose edges (`.edge`, data-index the edge's
 * place in graph.edges) and nodes (`.node`, data-id its key) a caller may mark.
 */
export function drawGraph(graph, column, { starts = [], ends = [] } = {}) {
  const { at, wide, width, height, crossings: crossed } = layout(graph, column);
  const marker = `arrow-${++drawings}`;
  const between = new Map();
  for (const edge of graph.edges) {
    const pair = [edge.source, edge.target].sort().join(" ");
    between.set(pair, [...(between.get(pair) || []), edge]);
  }
  const [startSet, endSet] = [new Set(starts), new Set(ends)];
  const arrow = (id, cls) => svg(
    "marker",
    { id, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
    svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: cls }),
  );
  const drawing = svg(
    "svg",
    { class: "path-graph", role: "group", "aria-label": "shortest paths (arrow keys pan; + and - zoom; 0 fits)", tabindex: 0, height, "data-crossings": crossed, "data-marker": marker },
    svg("defs", {}, arrow(marker, "arrow-head"), arrow(`${marker}-on`, "arrow-head on")),
    svg("g", { class: "edges" }, graph.edges.map((edge, index) => edgeDrawing(edge, index, graph, at, wide, between, marker))),
    svg("g", { class: "nodes" }, Object.keys(graph.nodes).map((id) => nodeDrawing(id, graph.nodes[id], at.get(id), wide, startSet, endSet))),
  );
  drawing.append(hoverLabel(drawing));
  const tools = zoomable(drawing, width, height);
  return { view: el("div", { class: "graph-view" }, tools, drawing), drawing };
}

/** The drawing with its zoom buttons, the start (if any) marked. */
export function pathGraph(graph, start, column = distances(graph, start)) {
  return drawGraph(graph, column, { starts: start === null || start === undefined ? [] : [start] }).view;
}
