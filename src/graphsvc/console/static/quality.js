// Data quality: the statistics of an environment kind (its aggregations by metric), of an
// AD domain or of an Azure tenant over a time window, as line charts and as a table.

import { get } from "./api.js";
import { SERIES_CLASSES, lineChart } from "./chart.js";
import { el, formatNumber, formatTime, notice, table } from "./dom.js";

const DAY = 86400000;
const WINDOWS = [
  ["7", "last 7 days"],
  ["30", "last 30 days"],
  ["90", "last 90 days"],
  ["365", "last year"],
];
const PAGE_SIZE = 1000;
const MOST_ROWS = 20000; // a window's rows fetched at most, in pages

/** Every row of a paged list in the window, oldest first. */
async function fetchRows(path, query) {
  const rows = [];
  for (let skip = 0; skip < MOST_ROWS; skip += PAGE_SIZE) {
    const answer = await get(path, { ...query, skip, limit: PAGE_SIZE, sort_by: "created_at" });
    rows.push(...answer.data);
    if (answer.data.length < PAGE_SIZE || rows.length >= answer.count) break;
  }
  return rows;
}

function sourcesOf(environments, extensions) {
  const kinds = extensions.data.flatMap((extension) =>
    extension.environment_kinds.map((kind) => ({
      key: `kind/${kind.id}`,
      label: `${extension.display_name}: ${kind.name} (all environments)`,
    })),
  );
  const each = environments.data.map((environment) => ({
    key: `${environment.type === "azure" ? "tenant" : "domain"}/${encodeURIComponent(environment.id)}`,
    label: `${environment.type === "azure" ? "Azure tenant" : "AD domain"} ${environment.name}`,
  }));
  return [...kinds, ...each];
}

/** [{name, points}] per metric (aggregations) or per count column (domain, tenant). */
function seriesOf(kind, rows) {
  const byName = new Map();
  const add = (name, row, value) => {
    if (typeof value !== "number") return;
    if (!byName.has(name)) byName.set(name, []);
    byName.get(name).push({ time: Date.parse(row.created_at), value });
  };
  for (const row of rows) {
    if (kind === "kind") {
      add(`${row.metric_type}: ${row.metric_name}`, row, row.metric_value);
    } else {
      for (const [name, value] of Object.entries(row)) {
        if (name !== "id" && !name.endsWith("_at")) add(name, row, value);
      }
    }
  }
  return [...byName].map(([name, points]) => ({ name, points }));
}

function groupsOf(kind, series) {
  // Counts and completeness shares differ by orders of magnitude: one chart each.
  if (kind === "kind") {
    const groups = new Map();
    for (const each of series) {
      const type = each.name.split(":")[0];
      if (!groups.has(type)) groups.set(type, []);
      groups.get(type).push(each);
    }
    return [...groups];
  }
  const shares = series.filter((each) => each.name.endsWith("completeness"));
  const counts = series.filter((each) => !each.name.endsWith("completeness"));
  return [["counts", counts], ["completeness", shares]].filter(([, members]) => members.length);
}

function rowsTable(kind, rows) {
  if (kind === "kind") {
    return table(
      [
        ["Collected", (row) => formatTime(row.created_at)],
        ["Type", (row) => row.metric_type],
        ["Metric", (row) => row.metric_name],
        ["Value", (row) => formatNumber(row.metric_value)],
      ],
      rows.slice().reverse(),
      { class: "numbers" },
    );
  }
  const names = Object.keys(rows[0] || {}).filter(
    (name) => typeof rows[0][name] === "number" && name !== "id",
  );
  return table(
    [["Collected", (row) => formatTime(row.created_at)], ...names.map((name) => [name.replace(/_/g, " "), (row) => formatNumber(row[name])])],
    rows.slice().reverse(),
    { class: "numbers" },
  );
}

export async function showQuality(page, rest, current) {
  const [environments, extensions] = await Promise.all([
    get("/available-domains"),
    get("/graph-schema/extensions"),
  ]);
  if (!current()) return;
  const sources = sourcesOf(environments, extensions);
  // #/quality/<kind|domain|tenant>/<id>[/<days>]
  const asked = rest.length >= 2 ? `${rest[0]}/${encodeURIComponent(rest[1])}` : null;
  const known = asked === null || sources.some((each) => each.key === asked);
  const chosen = known && asked !== null ? asked : sources[0]?.key;
  const days = WINDOWS.some(([value]) => value === rest[2]) ? rest[2] : "30";
  const source = el(
    "select",
    { id: "quality-source", "aria-label": "environment" },
    sources.map((each) => el("option", { value: each.key, selected: each.key === chosen }, each.label)),
  );
  const span = el(
    "select",
    { id: "quality-window", "aria-label": "time window" },
    WINDOWS.map(([value, label]) => el("option", { value, selected: value === days }, label)),
  );
  const from = el("input", { type: "date", id: "quality-from", "aria-label": "from" });
  const until = el("input", { type: "date", id: "quality-until", "aria-label": "until" });
  const output = el("div", { id: "quality-output" });
  page.append(
    el("h1", {}, "Data quality"),
    ...(known ? [] : [notice("No environment by that id has data: showing the first one.", "note")]),
    el("div", { class: "controls" }, el("label", {}, "Statistics of ", source), el("label", {}, " over the ", span), el("label", {}, " or from ", from), el("label", {}, " until ", until)),
    output,
  );
  source.addEventListener("change", () => {
    window.location.hash = `#/quality/${source.value}/${span.value}`;
  });
  span.addEventListener("change", () => {
    window.location.hash = `#/quality/${source.value}/${span.value}`;
  });

  async function draw() {
    output.replaceChildren(el("p", { class: "muted" }, "Loading…"));
    const [kind, encoded] = (source.value || "").split("/");
    const id = [decodeURIComponent(encoded || "")];
    const end = until.value ? new Date(Date.parse(until.value) + DAY) : new Date();
    const start = from.value ? new Date(Date.parse(from.value)) : new Date(end.getTime() - Number(span.value) * DAY);
    const window_ = { start: start.toISOString(), end: end.toISOString() };
    let rows;
    if (kind === "kind") {
      rows = await fetchRows("/data-quality-stats-aggregations", { schema_environment_kind_id: id[0], ...window_ });
    } else {
      const base = kind === "tenant" ? "azure-tenants" : "ad-domains";
      rows = await fetchRows(`/${base}/${encodeURIComponent(id.join("/"))}/data-quality-stats`, window_);
    }
    if (!current()) return;
    const series = seriesOf(kind, rows);
    output.replaceChildren(
      el("p", { class: "muted" }, `${rows.length} sample${rows.length === 1 ? "" : "s"} from ${formatTime(window_.start)} to ${formatTime(window_.end)}`),
      // Small multiples: at most as many series to a chart as there are distinct colours (an
      // AD kind's aggregations have some 46), so that no two lines of one chart share one.
      ...groupsOf(kind, series).flatMap(([title, all]) => {
        const parts = [];
        for (let i = 0; i < all.length; i += SERIES_CLASSES) parts.push(all.slice(i, i + SERIES_CLASSES));
        if (!parts.length) parts.push([]);
        return parts.map((members, n) => [parts.length > 1 ? `${title} (${n + 1} of ${parts.length})` : title, members]);
      }).map(([title, members]) => {
        const chart = lineChart(members, `${title} over time`, [start.getTime(), end.getTime()]);
        return el(
          "figure",
          { class: "chart-box" },
          el("figcaption", {}, title),
          chart || el("p", {}, "No samples in this window."),
          el("ul", { class: "legend" }, members.map((each, index) => el("li", { class: `series-${index % SERIES_CLASSES}` }, each.name.replace(/_/g, " ")))),
        );
      }),
      rows.length ? el("div", { class: "scroll" }, rowsTable(kind, rows)) : el("p", {}, "No samples in this window."),
    );
  }
  const redraw = () => draw().catch((error) => output.replaceChildren(el("p", { class: "notice error", role: "alert" }, error.message)));
  for (const control of [from, until]) control.addEventListener("change", redraw);
  if (sources.length) await draw();
  else output.append(el("p", {}, "No environment has data yet."));
}
