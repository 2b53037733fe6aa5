// Paths: every shortest path between two objects, drawn as a graph with the kinds on its
// edges, and a domain's exposure: who has a path to its tier zero.

import { ApiFailure, get } from "./api.js";
import { el, formatNumber, notice, pager, table } from "./dom.js";
import { entityLink } from "./entity.js";
import { distances, distancesFrom } from "./graph.js";
import { badges, ownedButton } from "./marks.js";
import { pathView } from "./pathview.js";

const EXPOSURE_SIZE = 50;
const TAG_PATHS = 100;
// More nodes than this make a drawing nobody can read (1,500 parallel paths drew an SVG
// 126,000 units tall): the edges are listed instead, the first LISTED_EDGES of them.
const MOST_DRAWN = 120;
const LISTED_EDGES = 500;

/** An input that finds objects by name as one types; `chosen()` is the object id. */
function picker(id, label, initial) {
  const input = el("input", { type: "search", id, value: initial, placeholder: "a name or an object id", "aria-label": label, autocomplete: "off" });
  const choices = el("ul", { class: "choices", id: `${id}-choices` });
  const named = el("span", { class: "muted picked", id: `${id}-name` });
  let timer = 0;
  let asked = 0;
  input.addEventListener("input", () => {
    clearTimeout(timer);
    const text = input.value.trim();
    named.textContent = "";
    if (text.length < 2) {
      choices.replaceChildren();
      return;
    }
    timer = setTimeout(async () => {
      const mine = ++asked;
      try {
        const answer = await get("/search", { q: text, limit: 8 });
        if (mine !== asked) return;
        choices.replaceChildren(
          ...answer.data.map((row) => {
            const choice = el("button", { type: "button", class: "choice", "data-object-id": row.objectid }, `${row.name || row.objectid} `, el("span", { class: "muted" }, row.type));
            choice.addEventListener("click", () => {
              input.value = row.objectid;
              named.textContent = `${row.name || row.objectid} (${row.type})`;
              choices.replaceChildren();
            });
            return el("li", {}, choice);
          }),
        );
      } catch {
        choices.replaceChildren();
      }
    }, 250);
  });
  /** The object id the typed text names: an object id, or a name one object has (any
   * case), as if its suggestion were picked; null, with the suggestions shown, otherwise. */
  async function resolve() {
    const text = input.value.trim();
    if (!text) return null;
    const rows = (await get("/search", { q: text, limit: 8 })).data;
    const same = (value) => (value || "").toUpperCase() === text.toUpperCase();
    const found = rows.filter((row) => same(row.objectid));
    const byName = rows.filter((row) => same(row.name));
    const only = found.length === 1 ? found[0] : byName.length === 1 ? byName[0] : rows.length === 1 ? rows[0] : null;
    if (only) {
      input.value = only.objectid;
      named.textContent = `${only.name || only.objectid} (${only.type})`;
      return only.objectid;
    }
    input.dispatchEvent(new Event("input"));  // the suggestions, to pick from
    return null;
  }
  return {
    box: el("label", { class: "picker" }, `${label} `, input, named, choices),
    chosen: () => input.value.trim(),
    resolve,
    name: (node) => {
      named.textContent = `${node.label} (${node.kind})`;
    },
  };
}

/** The shortest paths from start to end, drawn; the pickers then name both ends. */
async function drawPaths(output, start, end, current, pickers) {
  output.replaceChildren(el("p", { class: "muted" }, "Finding paths…"));
  let answer;
  try {
    answer = await get("/graphs/shortest-path", { start_node: start, end_node: end });
  } catch (error) {
    if (!current()) return;
    if (error instanceof ApiFailure && error.status === 404) {
      output.replaceChildren(notice(error.message, "note"));
      return;
    }
    throw error;
  }
  if (!current()) return;
  const graph = answer.data;
  const idOf = (objectId) => Object.keys(graph.nodes).find((id) => graph.nodes[id].objectId.toUpperCase() === objectId.toUpperCase());
  const startId = idOf(start);
  const endId = idOf(end);
  for (const [picker, objectId] of [[pickers[0], start], [pickers[1], end]]) {
    const found = idOf(objectId);
    if (found !== undefined) picker.name(graph.nodes[found]);
  }
  output.replaceChildren(...drawnGraph(graph, distances(graph, startId), { starts: [startId], ends: endId === undefined ? [] : [endId] }));
}

/** The graph drawn (or, too large, its edges listed) with its paths to highlight one by
 * one and its kinds to filter, its edges, and its objects with their marks, each to be
 * marked owned or not from here. `sides`: the starts and ends, and paths-between's own
 * paths (`given`). */
function drawnGraph(graph, column, sides) {
  const nodes = Object.keys(graph.nodes).length;
  const ordered = graph.edges.slice().sort((a, b) => (column.get(a.source) ?? 0) - (column.get(b.source) ?? 0));
  const drawn = nodes <= MOST_DRAWN;
  const objects = Object.values(graph.nodes).sort((a, b) => a.label.localeCompare(b.label));
  return [
    drawn
      ? pathView(graph, column, sides)
      : notice(`${nodes} nodes on ${graph.edges.length} edges: too many to draw; ${graph.edges.length > LISTED_EDGES ? `the first ${LISTED_EDGES} edges are` : "the edges are"} listed.`, "note"),
    table(
      [
        ["From", (edge) => entityLink(graph.nodes[edge.source].objectId, graph.nodes[edge.source].kinds, graph.nodes[edge.source].label)],
        ["Kind", (edge) => edge.kind],
        ["To", (edge) => entityLink(graph.nodes[edge.target].objectId, graph.nodes[edge.target].kinds, graph.nodes[edge.target].label)],
      ],
      ordered.slice(0, LISTED_EDGES),
      { class: "path-edges" },
    ),
    el("h3", {}, "Objects on the paths"),
    table(
      [
        ["Object", (node) => entityLink(node.objectId, node.kinds, node.label)],
        ["Kind", (node) => node.kind],
        ["Marks", (node) => {
          const shown = el("span", {}, badges(node));
          return [shown, ownedButton(node.objectId, node.isOwnedObject, (owned) => shown.replaceChildren(badges({ ...node, isOwnedObject: owned })))];
        }],
      ],
      objects.slice(0, LISTED_EDGES),
      { class: "path-objects" },
    ),
  ];
}

/** The shortest paths from a tag's members to the nearest members of another, drawn. */
async function drawTagPaths(output, startTag, endTag, current) {
  output.replaceChildren(el("p", { class: "muted" }, "Finding paths…"));
  const answer = await get("/graphs/paths-between", { start_tag: startTag, end_tag: endTag, limit: TAG_PATHS });
  if (!current()) return;
  const found = answer.data;
  if (!found.paths.length) {
    output.replaceChildren(notice("No member of the first tag has a path to a member of the second.", "note"));
    return;
  }
  const starts = [...new Set(found.paths.map((path) => found.edges[path[0]].source))];
  const ends = [...new Set(found.paths.map((path) => found.edges[path[path.length - 1]].target))];
  const summary = `${found.paths.length}${found.truncated ? " (the first)" : ""} shortest paths from ${found.reaching} of the first tag's members.`;
  output.replaceChildren(el("p", { class: "muted", id: "tag-path-summary" }, summary), ...drawnGraph(found, distancesFrom(found, starts), { starts, ends, given: found.paths }));
}

async function showExposure(output, domainId, skip = 0) {
  output.replaceChildren(el("p", { class: "muted" }, "Loading…"));
  const answer = await get(`/domains/${encodeURIComponent(domainId)}/exposure`, { limit: EXPOSURE_SIZE, skip });
  const users = answer.users;
  const share = users.enabled
    ? `${formatNumber(users.exposed)} of the domain's ${formatNumber(users.enabled)} enabled users (${(users.share * 100).toFixed(1)}%) have a path to its tier zero`
    : "The domain has no enabled user in the graph (referred to only, or not collected)";
  output.replaceChildren(
    el("p", { class: "exposure-summary" }, `${share}; ${answer.count} principals in all.`),
    pager(answer.count, skip, EXPOSURE_SIZE, (page) => showExposure(output, domainId, page)),
    table(
      [
        ["Principal", (row) => entityLink(row.objectID, row.kinds, row.name)],
        ["Kind", (row) => row.label],
        ["Steps", (row) => row.length],
        ["First step", (row) => [`${row.firstHop.kind} → `, entityLink(row.firstHop.objectID, [row.firstHop.label], row.firstHop.name)]],
      ],
      answer.data,
      { class: "exposure" },
    ),
  );
}

/** A form choosing two tags: the paths from the first's members to the second's. */
async function tagForm() {
  const tags = (await get("/asset-group-tags")).data.tags;
  const choose = (id, label, preferred) => el("label", {}, `${label} `, el("select", { id, "aria-label": label }, tags.map((tag) => el("option", { value: tag.id, selected: tag.id === preferred }, tag.name))));
  const form = el("form", { class: "controls", id: "tag-path-form" }, choose("tag-path-from", "From the members of", 2), choose("tag-path-to", "to those of", 1), el("button", { type: "submit" }, "Find paths"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const value = (id) => form.querySelector(`#${id}`).value;
    window.location.hash = `#/paths/tags/${value("tag-path-from")}/${value("tag-path-to")}`;
  });
  return form;
}

export async function showPaths(page, rest, current) {
  const betweenTags = rest[0] === "tags";
  const [start = "", end = ""] = betweenTags ? [] : rest;
  const from = picker("path-from", "From", start);
  const to = picker("path-to", "To", end);
  const form = el("form", { class: "controls", id: "path-form" }, from.box, to.box, el("button", { type: "submit" }, "Find paths"));
  const unresolved = el("div", { id: "path-unresolved" });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    unresolved.replaceChildren();
    const [start, end] = await Promise.all([from.resolve(), to.resolve()]);
    if (start && end) {
      window.location.hash = `#/paths/${encodeURIComponent(start)}/${encodeURIComponent(end)}`;
    } else if (from.chosen() && to.chosen()) {
      unresolved.replaceChildren(notice("More than one object (or none) has that name: pick one of the suggestions.", "note"));
    }
  });
  const output = el("div", { id: "path-output" });
  // Collected domains first (the first is shown): one only referred to (a trust's other
  // end) has no tier zero to show.
  const domains = (await get("/available-domains")).data
    .filter((each) => each.type === "active-directory")
    .sort((a, b) => Number(b.collected) - Number(a.collected));
  if (!current()) return;
  const domain = el("select", { id: "exposure-domain", "aria-label": "domain" }, domains.map((each) => el("option", { value: each.id }, each.collected ? each.name : `${each.name} (referred to only)`)));
  const exposure = el("div", { id: "exposure-output" });
  domain.addEventListener("change", () => showExposure(exposure, domain.value).catch((error) => exposure.replaceChildren(notice(error.message))));
  const tagPaths = el("div", { id: "tag-path-output" });
  const tagChooser = await tagForm();
  if (!current()) return;
  page.append(
    el("h1", {}, "Paths"),
    form,
    unresolved,
    output,
    el("h2", {}, "Paths between tags"),
    tagChooser,
    tagPaths,
    el("h2", {}, "Exposure of a domain's tier zero"),
    domains.length ? el("div", { class: "controls" }, el("label", {}, "Domain ", domain)) : el("p", {}, "No AD domain has data yet."),
    exposure,
  );
  const waits = [];
  if (start && end) waits.push(drawPaths(output, start, end, current, [from, to]));
  if (betweenTags && rest[1] && rest[2]) waits.push(drawTagPaths(tagPaths, rest[1], rest[2], current));
  if (domains.length) waits.push(showExposure(exposure, domain.value));
  await Promise.all(waits);
}
