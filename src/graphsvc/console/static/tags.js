// Tags: Tier Zero, Owned and the labels added, with their members and selectors; and a new
// label made from a Cypher query, its members previewed before it is kept.

import { ApiFailure, call, get } from "./api.js";
import { el, formatNumber, notice, table } from "./dom.js";
import { entityLink } from "./entity.js";

const TYPES = { 1: "tier", 2: "label", 3: "owned" };
const MEMBERS_SHOWN = 100;

function memberTable(members, attrs) {
  return table(
    [
      ["Member", (m) => entityLink(m.object_id, [m.primary_kind], m.name || m.object_id)],
      ["Kind", (m) => m.primary_kind],
      ["Object id", (m) => m.object_id],
    ],
    members,
    attrs,
  );
}

/** The form of a new label: a name and a Cypher query; Preview shows what it would select. */
function newLabelForm() {
  const name = el("input", { id: "tag-new-name", placeholder: "Crown Jewels", "aria-label": "name", required: true });
  const query = el("textarea", { id: "tag-new-query", "aria-label": "Cypher query", placeholder: "MATCH (c:Computer) WHERE c.name STARTS WITH 'SQL' RETURN c" });
  const preview = el("button", { type: "button", id: "tag-preview" }, "Preview");
  const result = el("div", { id: "tag-new-result" });
  const seeds = () => [{ type: 2, value: query.value.trim() }];
  preview.addEventListener("click", async () => {
    result.replaceChildren(el("p", { class: "muted" }, "Selecting…"));
    try {
      const answer = await call("POST", "/asset-group-tags/preview-selectors", { body: { seeds: seeds(), expansion: 2 }, query: { limit: MEMBERS_SHOWN } });
      const members = answer.data.members;
      result.replaceChildren(
        el("p", { class: "muted", id: "tag-preview-count" }, `${members.length}${members.length === MEMBERS_SHOWN ? " (the first)" : ""} members, with the members of its groups and the contents of its OUs`),
        memberTable(members, { class: "tag-preview" }),
      );
    } catch (error) {
      result.replaceChildren(notice(error.message));
    }
  });
  const form = el("form", { class: "card tag-form", id: "tag-new" },
    el("h2", {}, "A new label"),
    el("label", {}, "Name ", name),
    el("label", {}, "Its members: the nodes of a Cypher query ", query),
    el("div", { class: "controls" }, preview, el("button", { type: "submit" }, "Create")),
    result,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const made = await call("POST", "/asset-group-tags", { body: { name: name.value.trim() } });
      await call("POST", `/asset-group-tags/${made.data.id}/selectors`, { body: { name: "query", seeds: seeds() } });
      window.location.hash = `#/tags/${made.data.id}`;
    } catch (error) {
      result.replaceChildren(notice(error instanceof ApiFailure ? error.message : String(error)));
    }
  });
  return form;
}

async function showTagList(page, current) {
  const tags = (await get("/asset-group-tags", { counts: "true" })).data.tags;
  if (!current()) return;
  page.append(
    el("h1", {}, "Tags"),
    el("p", { class: "muted" }, "What is marked: Tier Zero, Owned and the labels added. A mark lives in its tag's selectors, kept across collections."),
    table(
      [
        ["Tag", (t) => el("a", { href: `#/tags/${t.id}`, class: "tag-link" }, t.name)],
        ["Type", (t) => TYPES[t.type]],
        ["Members", (t) => formatNumber(t.counts.members)],
        ["Selectors", (t) => `${formatNumber(t.counts.selectors - t.counts.disabled_selectors)} enabled of ${formatNumber(t.counts.selectors)}`],
      ],
      tags,
      { class: "tags" },
    ),
    newLabelForm(),
  );
}

async function showTag(page, id, current) {
  const [tag, members, selectors] = await Promise.all([
    get(`/asset-group-tags/${encodeURIComponent(id)}`),
    get(`/asset-group-tags/${encodeURIComponent(id)}/members`, { limit: MEMBERS_SHOWN, sort_by: "name" }),
    get(`/asset-group-tags/${encodeURIComponent(id)}/selectors`, { limit: 500, counts: "true" }),
  ]);
  if (!current()) return;
  const seedText = (s) => s.seeds.map((seed) => (seed.type === 1 ? `object id ${seed.value}` : seed.value)).join("; ");
  page.append(
    el("h1", { id: "tag-name" }, tag.data.tag.name),
    el("p", { class: "muted" }, el("a", { href: "#/tags" }, "All tags"), ` · ${TYPES[tag.data.tag.type]} · ${tag.data.tag.description}`),
    el("h2", {}, "Members"),
    el("p", { class: "muted", id: "tag-member-count" }, `${formatNumber(members.count)} in all${members.count > members.data.members.length ? `, the first ${members.data.members.length} shown` : ""}`),
    memberTable(members.data.members, { class: "tag-members" }),
    el("h2", {}, "Selectors"),
    table(
      [
        ["Selector", (s) => s.name],
        ["Enabled", (s) => (s.disabled_at ? "no" : "yes")],
        ["Members", (s) => formatNumber(s.counts.members)],
        ["Seeds", seedText],
      ],
      selectors.data.selectors,
      { class: "tag-selectors" },
    ),
  );
}

// #/tags, or #/tags/<id>
export async function showTags(page, rest, current) {
  if (rest[0]) await showTag(page, rest[0], current);
  else await showTagList(page, current);
}
