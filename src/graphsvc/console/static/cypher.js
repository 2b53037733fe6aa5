// Cypher: a query typed, or picked from a list to start from, run on the graph; its nodes
// and relationships drawn as the paths page draws them and listed, its other values as a
// table. The query is in the address (#/cypher/<query>), so a link or the back button
// brings it again.

import { ApiFailure, call } from "./api.js";
import { el, notice, table } from "./dom.js";
import { entityLink } from "./entity.js";
import { pathGraph } from "./graph.js";

// More nodes than this make a drawing nobody can read (the paths page's bound).
const MOST_DRAWN = 120;
const LISTED = 500;

const STARTERS = [
  ["Kerberoastable users", "MATCH (u:User {hasspn: true, enabled: true})\nRETURN u"],
  ["AS-REP roastable users", "MATCH (u:User {dontreqpreauth: true, enabled: true})\nRETURN u"],
  ["Computers that allow unconstrained delegation", "MATCH (c:Computer {unconstraineddelegation: true})\nRETURN c"],
  ["Who is in Domain Admins, through any nesting", "MATCH p = (m)-[:MemberOf*1..]->(g:Group)\nWHERE g.objectid ENDS WITH '-512'\nRETURN p"],
  [
    "Shortest paths from Kerberoastable users to Domain Admins",
    "MATCH p = shortestPath((u:User {hasspn: true, enabled: true})-[:AD_ATTACK_PATHS*1..]->(g:Group))\nWHERE g.objectid ENDS WITH '-512'\nRETURN p",
  ],
  ["Objects by kind", "MATCH (n)\nRETURN labels(n)[0] AS kind, count(*) AS objects\nORDER BY objects DESC"],
];

/** Each node's column: its distance from the nodes no edge of the answer leads to. */
function columns(graph) {
  const ids = Object.keys(graph.nodes);
  const entered = new Set(graph.edges.map((edge) => edge.target));
  const outgoing = new Map(ids.map((id) => [id, []]));
  for (const edge of graph.edges) outgoing.get(edge.source)?.push(edge.target);
  const roots = ids.filter((id) => !entered.has(id));
  const column = new Map((roots.length ? roots : ids.slice(0, 1)).map((id) => [id, 0]));
  const queue = [...column.keys()];
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

/** The literals as rows: a key met again starts the next row (a row's values come together). */
function literalRows(literals) {
  const keys = [];
  const rows = [];
  let row = null;
  for (const { key, value } of literals) {
    if (!keys.includes(key)) keys.push(key);
    if (row === null || key in row) {
      row = {};
      rows.push(row);
    }
    row[key] = value;
  }
  return { keys, rows };
}

function shown(value) {
  if (value === null || value === undefined) return "null";
  return typeof value === "string" ? value : JSON.stringify(value);
}

function nodeLink(graph, id) {
  const node = graph.nodes[id];
  return node ? entityLink(node.objectId, node.kinds, node.label) : id;
}

async function run(output, query, current) {
  output.replaceChildren(el("p", { class: "muted" }, "Running…"));
  let answer;
  try {
    answer = await call("POST", "/graphs/cypher", { body: { query } });
  } catch (error) {
    if (!current()) return;
    if (error instanceof ApiFailure && (error.status === 404 || error.status === 400 || error.status === 413)) {
      output.replaceChildren(notice(error.status === 404 ? "The query matched nothing." : error.message, error.status === 404 ? "note" : "error"));
      return;
    }
    throw error;
  }
  if (!current()) return;
  const graph = answer.data;
  const ids = Object.keys(graph.nodes);
  const parts = [];
  if (ids.length && graph.edges.length && ids.length <= MOST_DRAWN) {
    parts.push(el("figure", { class: "graph-box" }, pathGraph(graph, null, columns(graph))));
  }
  if (ids.length) {
    parts.push(
      el("h2", {}, `${ids.length} node${ids.length === 1 ? "" : "s"}`),
      table(
        [
          ["Name", (id) => nodeLink(graph, id)],
          ["Kind", (id) => graph.nodes[id].kind],
          ["Object id", (id) => graph.nodes[id].objectId],
        ],
        ids.slice(0, LISTED),
        { class: "cypher-nodes" },
      ),
    );
  }
  if (graph.edges.length) {
    parts.push(
      el("h2", {}, `${graph.edges.length} relationship${graph.edges.length === 1 ? "" : "s"}`),
      table(
        [
          ["From", (edge) => nodeLink(graph, edge.source)],
          ["Kind", (edge) => edge.kind],
          ["To", (edge) => nodeLink(graph, edge.target)],
        ],
        graph.edges.slice(0, LISTED),
        { class: "cypher-edges" },
      ),
    );
  }
  if (graph.literals.length) {
    const { keys, rows } = literalRows(graph.literals);
    parts.push(table(keys.map((key) => [key, (row) => shown(row[key])]), rows.slice(0, LISTED), { class: "cypher-values" }));
  }
  output.replaceChildren(...parts);
}

export async function showCypher(page, rest, current) {
  const [asked = ""] = rest;
  const editor = el("textarea", { id: "cypher-query", rows: 6, spellcheck: "false", "aria-label": "Cypher query", placeholder: "MATCH (n:User) RETURN n LIMIT 10" }, asked);
  const form = el("form", { class: "cypher-form", id: "cypher-form" }, editor, el("button", { type: "submit" }, "Run"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const query = editor.value.trim();
    if (query) window.location.hash = `#/cypher/${encodeURIComponent(query)}`;
  });
  const starters = el(
    "ul",
    { class: "starters", id: "cypher-starters" },
    STARTERS.map(([title, query]) => {
      const choice = el("button", { type: "button", class: "choice" }, title);
      choice.addEventListener("click", () => {
        window.location.hash = `#/cypher/${encodeURIComponent(query)}`;
      });
      return el("li", {}, choice);
    }),
  );
  const output = el("div", { id: "cypher-output" });
  page.append(
    el("h1", {}, "Cypher"),
    el("p", { class: "muted" }, "Read-only queries on the graph (docs/cypher.md). To start from:"),
    starters,
    form,
    output,
  );
  if (asked) await run(output, asked, current);
}
