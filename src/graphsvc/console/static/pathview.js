// A drawn path answer to read one path at a time: its shortest paths from the start(s) to
// the end(s), each highlighted on its own (Previous, Next, All), and its relationship kinds
// to show or hide, a node on no path left by the kinds shown dimmed.

import { el, formatNumber } from "./dom.js";
import { distancesFrom, drawGraph, shorten } from "./graph.js";

export const MOST_PATHS = 50; // paths offered one by one

/**
 * The shortest paths (each the indexes of its edges in graph.edges, from a start on) from
 * `starts` to `ends` over the edges `shown` keeps: the first `most`, and how many there are.
 * An edge is on one when it leads one step further from the starts; a path stops at an end.
 */
export function shortestPaths(graph, starts, ends, shown = () => true, most = MOST_PATHS) {
  const distance = distancesFrom(graph, starts, shown);
  const endSet = new Set(ends);
  const onward = new Map();
  graph.edges.forEach((edge, index) => {
    if (!shown(edge) || endSet.has(edge.source)) return;
    const [from, to] = [distance.get(edge.source), distance.get(edge.target)];
    if (from === undefined || to !== from + 1) return;
    onward.set(edge.source, [...(onward.get(edge.source) || []), index]);
  });
  // How many paths go on from each node to an end (memoised: the steps are a DAG).
  const ways = new Map();
  const count = (id) => {
    if (endSet.has(id)) return 1;
    if (!ways.has(id)) ways.set(id, (onward.get(id) || []).reduce((sum, index) => sum + count(graph.edges[index].target), 0));
    return ways.get(id);
  };
  const starting = starts.filter((start) => !endSet.has(start));
  const total = starting.reduce((sum, start) => sum + count(start), 0);
  const paths = [];
  const walk = (id, steps) => {
    if (paths.length >= most) return;
    if (endSet.has(id)) {
      paths.push(steps);
      return;
    }
    for (const index of onward.get(id) || []) {
      if (count(graph.edges[index].target) > 0) walk(graph.edges[index].target, [...steps, index]);
    }
  };
  for (const start of starting) walk(start, []);
  return { paths, total };
}

/** The nodes on any path from starts to ends over the edges `shown` keeps. */
function nodesOnPaths(graph, starts, ends, shown) {
  const forward = distancesFrom(graph, starts, shown);
  const reversed = { nodes: graph.nodes, edges: graph.edges.map((edge) => ({ ...edge, source: edge.target, target: edge.source })) };
  const backward = distancesFrom(reversed, ends, shown);
  return new Set(Object.keys(graph.nodes).filter((id) => forward.has(id) && backward.has(id)));
}

/**
 * The view of a path answer: the drawing, a chooser of its paths and a filter of its
 * kinds. `given` (paths-between's own list, as edge indexes) replaces the paths found here.
 */
export function pathView(graph, column, { starts, ends, given = null }) {
  const { view, drawing } = drawGraph(graph, column, { starts, ends });
  const edges = [...drawing.querySelectorAll(".edge")];
  const nodes = [...drawing.querySelectorAll(".node")];
  const marker = drawing.dataset.marker;
  const hidden = new Set(); // kinds unchecked
  const shown = (edge) => !hidden.has(edge.kind);
  let found = { paths: [], total: 0 };
  let chosen = -1; // -1: all

  const position = el("span", { class: "path-position", "aria-live": "polite" });
  const steps = el("p", { class: "path-steps muted" });
  const previous = el("button", { type: "button", class: "path-previous" }, "Previous");
  const next = el("button", { type: "button", class: "path-next" }, "Next");
  const all = el("button", { type: "button", class: "path-all" }, "All");

  function highlight() {
    const path = chosen >= 0 ? found.paths[chosen] : null;
    const onPath = new Set(path || []);
    const nodesOn = new Set(path ? [graph.edges[path[0]].source, ...path.map((index) => graph.edges[index].target)] : []);
    drawing.classList.toggle("focused", Boolean(path));
    for (const edge of edges) {
      const on = onPath.has(Number(edge.dataset.index));
      edge.classList.toggle("on-path", on);
      edge.querySelector(".line").setAttribute("marker-end", `url(#${marker}${on ? "-on" : ""})`);
    }
    for (const node of nodes) node.classList.toggle("on-path", nodesOn.has(node.dataset.id));
    const offered = formatNumber(found.paths.length);
    const more = found.total > found.paths.length ? ` (the first of ${formatNumber(found.total)} shortest paths)` : "";
    position.textContent = !found.paths.length ? "No path with the kinds shown" : `${path ? `Path ${chosen + 1} of ${offered}` : `All ${offered} paths`}${more}`;
    previous.disabled = !found.paths.length || chosen === 0;
    next.disabled = !found.paths.length || chosen === found.paths.length - 1;
    all.disabled = chosen < 0;
    steps.replaceChildren();
    if (path) {
      steps.append(shorten(graph.nodes[graph.edges[path[0]].source].label, 40));
      for (const index of path) {
        const edge = graph.edges[index];
        steps.append(" ", el("span", { class: "step-kind" }, `—${edge.kind}→`), " ", shorten(graph.nodes[edge.target].label, 40));
      }
    }
  }

  function filter() {
    for (const edge of edges) edge.classList.toggle("filtered", hidden.has(edge.dataset.kind));
    const reached = nodesOnPaths(graph, starts, ends, shown);
    for (const id of [...starts, ...ends]) reached.add(id); // the question's ends stay plain
    for (const node of nodes) node.classList.toggle("unreachable", !reached.has(node.dataset.id));
    for (const edge of edges) {
      const { source, target } = graph.edges[Number(edge.dataset.index)];
      edge.classList.toggle("unreachable", !reached.has(source) || !reached.has(target));
    }
    if (given) {
      const kept = given.filter((path) => path.every((index) => shown(graph.edges[index])));
      found = { paths: kept.slice(0, MOST_PATHS), total: kept.length };
    } else {
      found = shortestPaths(graph, starts, ends, shown);
    }
    chosen = -1;
    highlight();
  }

  previous.addEventListener("click", () => {
    chosen = chosen < 0 ? found.paths.length - 1 : chosen - 1;
    highlight();
  });
  next.addEventListener("click", () => {
    chosen += 1;
    highlight();
  });
  all.addEventListener("click", () => {
    chosen = -1;
    highlight();
  });

  const counts = new Map();
  for (const edge of graph.edges) counts.set(edge.kind, (counts.get(edge.kind) || 0) + 1);
  const kinds = [...counts.keys()].sort((a, b) => a.localeCompare(b));
  const boxes = kinds.map((kind) => {
    const box = el("input", { type: "checkbox", value: kind, checked: true });
    box.addEventListener("change", () => {
      if (box.checked) hidden.delete(kind);
      else hidden.add(kind);
      filter();
    });
    return el("label", { class: "kind-choice", "data-kind": kind }, box, ` ${kind} `, el("span", { class: "muted" }, `(${formatNumber(counts.get(kind))})`));
  });
  filter();
  return el(
    "figure",
    { class: "graph-box path-view" },
    el("div", { class: "path-choice controls", role: "group", "aria-label": "paths" }, position, previous, next, all),
    el("fieldset", { class: "kind-filter" }, el("legend", {}, "Relationship kinds shown"), boxes),
    view,
    steps,
  );
}
