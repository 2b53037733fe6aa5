// A path graph drawn as SVG: nodes in columns by their distance from the start (every
// shortest path runs left to right), an arrow per edge with its kind written on it.

import { svg } from "./dom.js";

const COLUMN = 230;
const ROW = 84;
const MARGIN = 60;
const SIDE = 120; // room for the first and last column's names
const RADIUS = 16;
const BEND = 22; // how far apart parallel edges bow
const KIND_CLASSES = ["User", "Group", "Computer", "Domain", "GPO", "OU", "Container"];

function kindClass(kinds) {
  const known = (kinds || []).find((kind) => KIND_CLASSES.includes(kind));
  return known ? `kind-${known.toLowerCase()}` : "kind-other";
}

function shorten(name, length = 28) {
  return name.length > length ? `${name.slice(0, length - 1)}…` : name;
}

/**
 * graph: the shortest-path answer's data ({nodes: {id: {label, kind, kinds, objectId}},
 * edges: [{source, target, kind}]}); start: the start's node id; column: its distances, if
 * already worked out.
 */
/** Each node's distance from the start over the answer's edges: its column. */
export function distances(graph, start) {
  return distancesFrom(graph, [start]);
}

/** Each node's distance from the nearest of several starts (paths between sets). */
export function distancesFrom(graph, starts) {
  const ids = Object.keys(graph.nodes);
  const outgoing = new Map(ids.map((id) => [id, []]));
  for (const edge of graph.edges) outgoing.get(edge.source)?.push(edge.target);
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

export function pathGraph(graph, start, column = distances(graph, start)) {
  const ids = Object.keys(graph.nodes);
  const columns = [];
  for (const id of ids) {
    const at = column.has(id) ? column.get(id) : 0;
    (columns[at] ||= []).push(id);
  }
  const rows = Math.max(...columns.map((ids_) => (ids_ ? ids_.length : 0)), 1);
  const height = MARGIN * 2 + (rows - 1) * ROW;
  const width = SIDE * 2 + (columns.length - 1) * COLUMN;
  const place = new Map();
  columns.forEach((members, at) => {
    (members || []).sort((a, b) => graph.nodes[a].label.localeCompare(graph.nodes[b].label));
    const offset = (height - ((members || []).length - 1) * ROW) / 2;
    (members || []).forEach((id, index) => place.set(id, { x: SIDE + at * COLUMN, y: offset + index * ROW }));
  });

  // Edges between the same two nodes (AdminTo and CanPSRemote, say) bend apart, each its
  // own way, so that neither line nor label hides another.
  const between = new Map();
  for (const edge of graph.edges) {
    const pair = [edge.source, edge.target].sort().join(" ");
    between.set(pair, [...(between.get(pair) || []), edge]);
  }
  const edges = graph.edges.map((edge) => {
    const from = place.get(edge.source);
    const to = place.get(edge.target);
    const length = Math.hypot(to.x - from.x, to.y - from.y) || 1;
    const [dx, dy] = [(to.x - from.x) / length, (to.y - from.y) / length];
    const [x1, y1] = [from.x + dx * RADIUS, from.y + dy * RADIUS];
    const [x2, y2] = [to.x - dx * (RADIUS + 4), to.y - dy * (RADIUS + 4)];
    const siblings = between.get([edge.source, edge.target].sort().join(" "));
    const bend = (siblings.indexOf(edge) - (siblings.length - 1) / 2) * BEND;
    // The control point, off the middle along the normal; the label at the curve's middle.
    const [cx, cy] = [(x1 + x2) / 2 - dy * bend * 2, (y1 + y2) / 2 + dx * bend * 2];
    const [lx, ly] = [(x1 + x2) / 2 - dy * bend, (y1 + y2) / 2 + dx * bend];
    return svg(
      "g",
      { class: "edge", "data-kind": edge.kind },
      svg("path", { d: `M ${x1} ${y1} Q ${cx} ${cy} ${x2} ${y2}`, "marker-end": "url(#arrow)" }),
      svg("text", { class: "edge-kind", x: lx, y: ly - 6, "text-anchor": "middle" }, edge.kind),
    );
  });
  const nodes = ids.map((id) => {
    const node = graph.nodes[id];
    const at = place.get(id);
    return svg(
      "g",
      { class: `node ${kindClass(node.kinds || [node.kind])}${id === start ? " start" : ""}`, "data-object-id": node.objectId },
      svg("circle", { cx: at.x, cy: at.y, r: RADIUS }),
      svg("text", { class: "node-kind", x: at.x, y: at.y + 4, "text-anchor": "middle" }, (node.kind || "?").slice(0, 2)),
      svg("text", { class: "node-label", x: at.x, y: at.y + RADIUS + 16, "text-anchor": "middle" }, shorten(node.label)),
      svg("title", {}, `${node.kind}: ${node.label}\n${node.objectId}`),
    );
  });
  return svg(
    "svg",
    { class: "path-graph", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "shortest paths" },
    svg(
      "defs",
      {},
      svg(
        "marker",
        { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 8, markerHeight: 8, orient: "auto-start-reverse" },
        svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrow-head" }),
      ),
    ),
    edges,
    nodes,
  );
}
