// Overview: every environment data exists for (AD domains, Azure tenants, OpenGraph
// extensions), with its last ingest and its counts; an AD domain also with the time its
// newest collection was made (the domain's lastseen: the collector's time, not the ingest's). An OpenGraph extension's come from
// the aggregations of its environment kinds: the newest run's metrics.

import { get } from "./api.js";
import { el, formatNumber, formatTime, notice, table } from "./dom.js";

const DOMAIN_COUNTS = ["users", "groups", "computers", "ous", "gpos", "sessions", "relationships"];
const TENANT_COUNTS = ["users", "groups", "apps", "service_principals", "devices", "vms", "relationships"];

async function collectedAt(environment) {
  if (environment.type === "azure" || !environment.collected) return null;
  try {
    const answer = await get(`/domains/${encodeURIComponent(environment.id)}`, { counts: false });
    return answer.data.props.lastseen || null;
  } catch {
    return null;
  }
}

async function latestStats(environment) {
  const path =
    environment.type === "azure"
      ? `/azure-tenants/${encodeURIComponent(environment.id)}/data-quality-stats`
      : `/ad-domains/${encodeURIComponent(environment.id)}/data-quality-stats`;
  try {
    const answer = await get(path, { limit: 1, sort_by: "-created_at" });
    return answer.data[0] || null;
  } catch (error) {
    return { failed: error.message };
  }
}

function environmentCard(environment, found, seen) {
  const names = environment.type === "azure" ? TENANT_COUNTS : DOMAIN_COUNTS;
  const kind = environment.type === "azure" ? "Azure tenant" : "AD domain";
  const stats = found && !found.failed ? found : null;
  return el(
    "article",
    { class: "card environment", "data-environment-id": environment.id },
    el("h2", {}, environment.name),
    el("p", { class: "muted" }, `${kind} · ${environment.id}`),
    found && found.failed
      ? notice(found.failed)
      : el(
          "p",
          {},
          "Last ingest: ",
          el("strong", {}, stats ? formatTime(stats.created_at) : environment.collected ? "none in the last 30 days" : "never: referred to only"),
        ),
    seen ? el("p", { class: "collected-at" }, "Collected: ", el("strong", {}, formatTime(seen))) : null,
    stats
      ? el("dl", { class: "counts" }, names.map((name) => [el("dt", {}, name.replace(/_/g, " ")), el("dd", {}, formatNumber(stats[name]))]))
      : null,
    el(
      "p",
      {},
      el("a", { href: `#/quality/${environment.type === "azure" ? "tenant" : "domain"}/${encodeURIComponent(environment.id)}` }, "Statistics"),
      // An AD domain is an entity with lists; a tenant has no entity route.
      environment.type === "azure" ? null : [" · ", el("a", { href: `#/entity/domains/${encodeURIComponent(environment.id)}` }, "Domain")],
    ),
  );
}

async function latestRun(kind) {
  try {
    const answer = await get("/data-quality-stats-aggregations", {
      schema_environment_kind_id: kind.id,
      sort_by: "-created_at",
      limit: 500,
    });
    const newest = answer.data[0];
    return newest ? answer.data.filter((row) => row.run_id === newest.run_id) : [];
  } catch (error) {
    return { failed: error.message };
  }
}

function extensionCard(extension, kind, found) {
  const metrics = Array.isArray(found) ? found : [];
  const nodes = metrics.filter((row) => row.metric_type === "node");
  const relationships = metrics
    .filter((row) => row.metric_type === "relationship")
    .reduce((sum, row) => sum + row.metric_value, 0);
  return el(
    "article",
    { class: "card environment", "data-environment-kind": kind.id },
    el("h2", {}, `${extension.display_name}: ${kind.name}`),
    el("p", { class: "muted" }, `OpenGraph extension ${extension.name} ${extension.version}`),
    found.failed
      ? notice(found.failed)
      : el("p", {}, "Last ingest: ", el("strong", {}, metrics.length ? formatTime(metrics[0].created_at) : "none in the last 30 days")),
    metrics.length
      ? el("dl", { class: "counts" }, [...nodes.map((row) => [row.metric_name, row.metric_value]), ["relationships", relationships]].map(([name, value]) => [el("dt", {}, name), el("dd", {}, formatNumber(value))]))
      : null,
    el("p", {}, el("a", { href: `#/quality/kind/${kind.id}` }, "Statistics")),
  );
}

export async function showOverview(page, _rest, current) {
  const [environments, extensions] = await Promise.all([
    get("/available-domains"),
    get("/graph-schema/extensions"),
  ]);
  const [stats, seen] = await Promise.all([
    Promise.all(environments.data.map((environment) => latestStats(environment))),
    Promise.all(environments.data.map((environment) => collectedAt(environment))),
  ]);
  const opengraph = extensions.data
    .filter((extension) => !extension.is_builtin)
    .flatMap((extension) => extension.environment_kinds.map((kind) => [extension, kind]));
  const runs = await Promise.all(opengraph.map(([, kind]) => latestRun(kind)));
  if (!current()) return;
  const cards = [
    ...environments.data.map((environment, i) => environmentCard(environment, stats[i], seen[i])),
    ...opengraph.map(([extension, kind], i) => extensionCard(extension, kind, runs[i])),
  ];
  page.append(
    el("h1", {}, "Overview"),
    cards.length === 0
      ? el("p", {}, "No data yet: upload collector files on the Uploads page.")
      : el("div", { class: "cards" }, cards),
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
