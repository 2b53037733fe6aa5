// Overview: every environment data exists for (AD domains, Azure tenants, OpenGraph
// extensions), with its last collection and its counts.

import { get } from "./api.js";
import { el, formatNumber, formatTime, table } from "./dom.js";

const DOMAIN_COUNTS = ["users", "groups", "computers", "ous", "gpos", "sessions", "relationships"];
const TENANT_COUNTS = ["users", "groups", "apps", "service_principals", "devices", "vms", "relationships"];

async function latestStats(environment) {
  const path =
    environment.type === "azure"
      ? `/azure-tenants/${encodeURIComponent(environment.id)}/data-quality-stats`
      : `/ad-domains/${encodeURIComponent(environment.id)}/data-quality-stats`;
  const answer = await get(path, { limit: 1, sort_by: "-created_at" });
  return answer.data[0] || null;
}

function environmentCard(environment, stats) {
  const names = environment.type === "azure" ? TENANT_COUNTS : DOMAIN_COUNTS;
  const kind = environment.type === "azure" ? "Azure tenant" : "AD domain";
  return el(
    "article",
    { class: "card environment", "data-environment-id": environment.id },
    el("h2", {}, environment.name),
    el("p", { class: "muted" }, `${kind} · ${environment.id}`),
    el(
      "p",
      {},
      "Last collection: ",
      el("strong", {}, stats ? formatTime(stats.created_at) : "none in the last 30 days"),
    ),
    stats
      ? el("dl", { class: "counts" }, names.map((name) => [el("dt", {}, name.replace(/_/g, " ")), el("dd", {}, formatNumber(stats[name]))]))
      : null,
    el(
      "p",
      {},
      el("a", { href: `#/quality/${environment.type === "azure" ? "tenant" : "domain"}/${encodeURIComponent(environment.id)}` }, "Statistics"),
      " · ",
      el("a", { href: `#/entity/search/${encodeURIComponent(environment.id)}` }, "Entity"),
    ),
  );
}

export async function showOverview(page, _rest, current) {
  const [environments, extensions] = await Promise.all([
    get("/available-domains"),
    get("/graph-schema/extensions"),
  ]);
  const stats = await Promise.all(environments.data.map((environment) => latestStats(environment)));
  if (!current()) return;
  page.append(
    el("h1", {}, "Overview"),
    environments.data.length === 0
      ? el("p", {}, "No data yet: upload collector files on the Uploads page.")
      : el("div", { class: "cards" }, environments.data.map((environment, i) => environmentCard(environment, stats[i]))),
    el("h2", {}, "Extensions (environment kinds)"),
    table(
      [
        ["Name", (x) => x.display_name],
        ["Namespace", (x) => x.name],
        ["Version", (x) => x.version],
        ["Environment kinds", (x) => x.environment_kinds.map((kind) => `${kind.name} (${kind.id})`).join(", ")],
        ["Statistics", (x) => x.environment_kinds.map((kind) => el("a", { href: `#/quality/kind/${kind.id}` }, kind.name))],
      ],
      extensions.data,
      { class: "extensions" },
    ),
  );
}
