// Cypher: a query typed, or picked from a list to start from or from the saved queries the
// user owns, was given or that are public, run on the graph; its nodes and relationships
// drawn as the paths page draws them and listed, its other values as a table. The query
// in the editor can be saved under a name. The query is in the address
// (#/cypher/<query>), so a link or the back button brings it again.

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

function runLink(title, query) {
  const choice = el("button", { type: "button", class: "choice" }, title);
  choice.addEventListener("click", () => {
    window.location.hash = `#/cypher/${encodeURIComponent(query)}`;
  });
  return choice;
}

/** The saved queries the user sees, each run with a click; the user's own can be deleted. */
async function fillSaved(list, status) {
  let answer;
  try {
    answer = await call("GET", "/saved-queries", { query: { scope: "all", sort_by: "name" } });
  } catch (error) {
    if (error instanceof ApiFailure && error.status === 403) {
      list.replaceChildren(el("li", { class: "muted" }, "Your role may not read saved queries."));
      return;
    }
    throw error;
  }
  if (!answer.data.length) {
    list.replaceChildren(el("li", { class: "muted" }, "None yet: run a query, then save it below."));
    return;
  }
  list.replaceChildren(
    ...answer.data.map((saved) => {
      const item = el("li", { "data-id": String(saved.id) }, runLink(saved.name, saved.query));
      if (saved.description) item.title = saved.description;
      if (saved.scope !== "owned") item.append(el("span", { class: "muted" }, ` (${saved.scope})`));
      else {
        const remove = el("button", { type: "button", class: "remove", "aria-label": `Delete ${saved.name}` }, "×");
        remove.addEventListener("click", async () => {
          try {
            await call("DELETE", `/saved-queries/${saved.id}`);
            status.replaceChildren(notice(`Deleted “${saved.name}”.`, "note"));
          } catch (error) {
            status.replaceChildren(notice(error.message, "error"));
          }
          await fillSaved(list, status);
        });
        item.append(remove);
      }
      return item;
    }),
  );
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
    STARTERS.map(([title, query]) => el("li", {}, runLink(title, query))),
  );
  const saved = el("ul", { class: "starters saved", id: "cypher-saved" });
  const status = el("div", { id: "cypher-save-status" });
  const name = el("input", { id: "cypher-save-name", "aria-label": "Name to save the query as", placeholder: "Name", required: "" });
  const description = el("input", { id: "cypher-save-description", "aria-label": "Description", placeholder: "Description (optional)" });
  const save = el("form", { class: "save-form", id: "cypher-save" }, name, description, el("button", { type: "submit" }, "Save query"));
  save.addEventListener("submit", async (event) => {
    event.preventDefault();
    const query = editor.value.trim();
    if (!query) {
      status.replaceChildren(notice("Type a query to save first.", "error"));
      return;
    }
    try {
      await call("POST", "/saved-queries", { body: { name: name.value.trim(), query, description: description.value.trim() } });
      status.replaceChildren(notice(`Saved as “${name.value.trim()}”.`, "note"));
      name.value = "";
      description.value = "";
    } catch (error) {
      if (!(error instanceof ApiFailure)) throw error;
      status.replaceChildren(notice(error.message, "error"));
    }
    await fillSaved(saved, status);
  });
  const output = el("div", { id: "cypher-output" });
  page.append(
    el("h1", {}, "Cypher"),
    el("p", { class: "muted" }, "Read-only queries on the graph (docs/cypher.md). To start from:"),
    starters,
    el("h2", {}, "Saved queries"),
    saved,
    form,
    save,
    status,
    output,
  );
  await fillSaved(saved, status);
  if (asked) await run(output, asked, current);
}
