// Entities: search by name or object id, then an entity's properties and its lists (admin
// users, DCOM, RDP, sessions, memberships, controllers...). Which lists a kind has, and the
// count that goes with each, come from the served OpenAPI document.

import { get } from "./api.js";
import { clear, el, formatNumber, formatTime, notice, pager, table } from "./dom.js";
import { badges, ownedButton } from "./marks.js";

const SEGMENTS = {
  Computer: "computers",
  User: "users",
  Group: "groups",
  Domain: "domains",
  OU: "ous",
  GPO: "gpos",
  Container: "containers",
  CertTemplate: "certtemplates",
  EnterpriseCA: "enterprisecas",
  RootCA: "rootcas",
  AIACA: "aiacas",
  NTAuthStore: "ntauthstores",
  IssuancePolicy: "issuancepolicies",
};
// Azure objects: the reference's route (/azure/<type>?object_id=...), its entity types, and
// the lists its panels show for each, with where the entity's answer keeps each list's size.
const AZURE_TYPES = {
  AZUser: "users", AZGroup: "groups", AZTenant: "tenants", AZManagementGroup: "management-groups",
  AZSubscription: "subscriptions", AZResourceGroup: "resource-groups", AZVM: "vms",
  AZManagedCluster: "managed-clusters", AZContainerRegistry: "container-registries",
  AZWebApp: "web-apps", AZLogicApp: "logic-apps", AZAutomationAccount: "automation-accounts",
  AZKeyVault: "key-vaults", AZDevice: "devices", AZApp: "applications", AZVMScaleSet: "vm-scale-sets",
  AZServicePrincipal: "service-principals", AZRole: "roles", AZFunctionApp: "function-apps",
  AZFederatedIdentityCredential: "federated-identity-credentials", AZBase: "az-base",
};
const RESOURCES = ["virtual-machines:AZVM", "managed-clusters:AZManagedCluster", "vm-scale-sets:AZVMScaleSet",
  "container-registries:AZContainerRegistry", "web-apps:AZWebApp", "logic-apps:AZLogicApp",
  "automation-accounts:AZAutomationAccount", "key-vaults:AZKeyVault", "function-apps:AZFunctionApp"];
const descendants = (...names) => names.map((name) => {
  const [list, kind] = name.split(":");
  return [`descendent-${list}`, (entity) => entity.descendents?.descendent_counts?.[kind]];
});
const count = (key) => (entity) => entity[key];
const INBOUND_CONTROL = ["inbound-control", count("inbound_object_control")];
const AZURE_LISTS = {
  "az-base": [["outbound-control", count("outbound_object_control")], ["inbound-control"]],
  users: [["group-membership", count("group_membership")], ["roles", count("roles")],
    ["outbound-execution-privileges", count("execution_privileges")],
    ["outbound-control", count("outbound_object_control")], INBOUND_CONTROL],
  groups: [["group-members", count("group_members")], ["group-membership", count("group_membership")],
    ["roles", count("roles")], ["outbound-control", count("outbound_object_control")], INBOUND_CONTROL],
  tenants: [...descendants("users:AZUser", "groups:AZGroup", "management-groups:AZManagementGroup",
    "subscriptions:AZSubscription", "resource-groups:AZResourceGroup", ...RESOURCES,
    "applications:AZApp", "service-principals:AZServicePrincipal", "devices:AZDevice"), INBOUND_CONTROL],
  "management-groups": [...descendants("management-groups:AZManagementGroup", "subscriptions:AZSubscription",
    "resource-groups:AZResourceGroup", ...RESOURCES), INBOUND_CONTROL],
  subscriptions: [...descendants("resource-groups:AZResourceGroup", ...RESOURCES), INBOUND_CONTROL],
  "resource-groups": [...descendants(...RESOURCES), INBOUND_CONTROL],
  vms: [["inbound-execution-privileges", count("inboundExecutionPrivileges")], INBOUND_CONTROL],
  devices: [["inbound-execution-privileges", count("inboundExecutionPrivileges")], INBOUND_CONTROL],
  "key-vaults": [["key-readers", (e) => e.Readers?.KeyReaders], ["certificate-readers", (e) => e.Readers?.CertificateReaders],
    ["secret-readers", (e) => e.Readers?.SecretReaders], ["all-readers", (e) => e.Readers?.AllReaders], INBOUND_CONTROL],
  "service-principals": [["roles", count("roles")], ["outbound-control", count("outbound_object_control")], INBOUND_CONTROL,
    ["outbound-abusable-app-role-assignments", count("outbound-abusable-app-role-assignments")],
    ["inbound-abusable-app-role-assignments", count("inbound-abusable-app-role-assignments")]],
  roles: [["active-assignments", count("active_assignments")], ["pim-assignments", count("pim_assignments")],
    ["role-approvers", count("approvers")]],
  "federated-identity-credentials": [],
};
const LIST_SIZE = 100;
let listRoutes = null; // segment -> [{path, summary, countField}], read once

async function entityLists() {
  if (listRoutes === null) {
    const document_ = await get("/spec/openapi.json");
    listRoutes = {};
    for (const [path, methods] of Object.entries(document_.paths)) {
      const found = /^\/api\/v2\/([a-z-]+)\/\{object_id\}\/([a-z-]+)$/.exec(path);
      if (!found || !methods.get || !methods.get["x-count-field"]) continue;
      (listRoutes[found[1]] ||= []).push({
        path: found[2],
        summary: methods.get.summary,
        countField: methods.get["x-count-field"],
      });
    }
  }
  return listRoutes;
}

export function segmentOf(kinds) {
  for (const kind of kinds) if (SEGMENTS[kind]) return SEGMENTS[kind];
  for (const kind of kinds) if (AZURE_TYPES[kind] && kind !== "AZBase") return `azure/${AZURE_TYPES[kind]}`;
  return kinds.includes("AZBase") ? "azure/az-base" : null;
}

export function entityLink(objectId, kinds, text) {
  const segment = segmentOf(kinds);
  return segment
    ? el("a", { href: `#/entity/${segment}/${encodeURIComponent(objectId)}`, class: "entity-link" }, text)
    : el("span", {}, text);
}

function searchForm(initial) {
  const input = el("input", { type: "search", id: "entity-query", value: initial, placeholder: "a name, part of one, or an object id", "aria-label": "search" });
  const form = el("form", { class: "controls", id: "entity-search" }, input, el("button", { type: "submit" }, "Search"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (input.value.trim()) window.location.hash = `#/entity/search/${encodeURIComponent(input.value.trim())}`;
  });
  return form;
}

async function showResults(page, query, current) {
  const answer = await get("/search", { q: query, limit: 100 });
  if (!current()) return;
  page.append(
    el("p", { class: "muted" }, `${answer.count} found${answer.count > answer.data.length ? `, the first ${answer.data.length} shown` : ""}`),
    table(
      [
        ["Name", (row) => entityLink(row.objectid, [row.type], row.name || row.objectid)],
        ["Kind", (row) => row.type],
        ["Object id", (row) => row.objectid],
      ],
      answer.data,
      { class: "results", id: "search-results" },
    ),
  );
}

// Properties SharpHound writes as seconds since 1970 (0 or -1: never).
const TIMES = new Set(["whencreated", "lastlogon", "lastlogontimestamp", "pwdlastset", "lastseen", "lastcollected"]);

function propertyValue(value, name) {
  if (value === null || value === undefined) return "";
  if (TIMES.has(name.toLowerCase()) && typeof value === "number") {
    return value > 0 ? `${formatTime(value * 1000)} (${value})` : `never (${value})`;
  }
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

// Which rights a listed node holds, and the group each comes through.
function holdsCell(row) {
  return el(
    "ul",
    { class: "holds" },
    (row.holds || []).map((held) =>
      el("li", {}, el("span", { class: "edge-kind" }, held.kind), ...(held.through ? [" through ", entityLink(held.through.objectID, held.through.kinds, held.through.name || held.through.objectID)] : [])),
    ),
  );
}

async function showList(box, segment, objectId, list, skip = 0) {
  clear(box).append(el("p", { class: "muted" }, "Loading…"));
  try {
    const answer = await get(`/${segment}/${encodeURIComponent(objectId)}/${list.path}`, { limit: LIST_SIZE, skip });
    box.replaceChildren(
      el("h3", {}, list.summary),
      pager(answer.count, skip, LIST_SIZE, (page) => showList(box, segment, objectId, list, page)),
      table(
        [
          ["Name", (row) => entityLink(row.objectID, row.kinds, row.name || row.objectID)],
          ["Kind", (row) => row.label],
          ...(answer.data.some((row) => row.holds?.length) ? [["Holds", holdsCell]] : []),
          ["Object id", (row) => row.objectID],
        ],
        answer.data,
        { class: "entity-list", "data-list": list.path },
      ),
    );
  } catch (error) {
    box.replaceChildren(notice(error.message));
  }
}

async function showEntity(page, segment, objectId, opened, current) {
  const [answer, lists] = await Promise.all([
    get(`/${segment}/${encodeURIComponent(objectId)}`, { counts: "true" }),
    entityLists(),
  ]);
  if (!current()) return;
  const entity = answer.data;
  const props = entity.props || {};
  const listBox = el("div", { id: "entity-list-box" });
  const buttons = (lists[segment] || []).map((list) => {
    const count = entity[list.countField];
    const button = el(
      "button",
      { type: "button", class: "list-button", "data-list": list.path, title: list.summary },
      `${list.path.replace(/-/g, " ")} `,
      el("span", { class: "count" }, formatNumber(count ?? "")),
    );
    button.addEventListener("click", () => {
      for (const other of page.querySelectorAll(".list-button")) other.classList.toggle("current", other === button);
      // The address names the open list (a link to it), without drawing the page again.
      history.replaceState(null, "", `#/entity/${segment}/${encodeURIComponent(objectId)}/${list.path}`);
      showList(listBox, segment, props.objectid || objectId, list);
    });
    return button;
  });
  const marks = el("span", { id: "entity-badges" }, badges(props));
  const mark = ownedButton(props.objectid || objectId, Boolean(props.isOwnedObject), (owned) => {
    marks.replaceChildren(badges({ ...props, isOwnedObject: owned }));
  }, "entity-mark-owned");
  page.append(
    el("h1", { class: "entity-name" }, props.name || objectId, marks),
    el("p", { class: "muted" }, `${segment.replace(/s$/, "")} · ${props.objectid || objectId} `, mark),
    el("div", { class: "entity-columns" },
      el("section", { class: "card" }, el("h2", {}, "Properties"),
        el("dl", { class: "properties" }, Object.entries(props).map(([name, value]) => [el("dt", {}, name), el("dd", {}, propertyValue(value, name))]))),
      el("section", { class: "card grow" }, el("h2", {}, "Lists"), el("div", { class: "list-buttons" }, buttons), listBox),
    ),
  );
  buttons.find((button) => button.dataset.list === opened)?.click();
}

async function showAzureList(box, type, objectId, related, skip = 0) {
  clear(box).append(el("p", { class: "muted" }, "Loading…"));
  try {
    const answer = await get(`/azure/${type}`, { object_id: objectId, related_entity_type: related, limit: LIST_SIZE, skip });
    box.replaceChildren(
      el("h3", {}, related.replace(/-/g, " ")),
      pager(answer.count, skip, LIST_SIZE, (page) => showAzureList(box, type, objectId, related, page)),
      table(
        [
          ["Name", (row) => entityLink(row.props.objectid, row.kinds, row.props.name || row.props.objectid)],
          ["Kind", (row) => row.kind],
          ["Object id", (row) => row.props.objectid],
        ],
        answer.data,
        { class: "entity-list", "data-list": related },
      ),
    );
  } catch (error) {
    box.replaceChildren(notice(error.message));
  }
}

// An Azure object: its properties and the lists the reference's panels show for its kind.
async function showAzureEntity(page, type, objectId, opened, current) {
  const answer = await get(`/azure/${type}`, { object_id: objectId, counts: "true" });
  if (!current()) return;
  const entity = answer.data;
  const props = entity.props || {};
  const listBox = el("div", { id: "entity-list-box" });
  const id = props.objectid || objectId;
  const buttons = (AZURE_LISTS[type] || [INBOUND_CONTROL]).map(([related, size]) => {
    const button = el(
      "button",
      { type: "button", class: "list-button", "data-list": related },
      `${related.replace(/-/g, " ")} `,
      el("span", { class: "count" }, formatNumber(size?.(entity) ?? "")),
    );
    button.addEventListener("click", () => {
      for (const other of page.querySelectorAll(".list-button")) other.classList.toggle("current", other === button);
      history.replaceState(null, "", `#/entity/azure/${type}/${encodeURIComponent(objectId)}/${related}`);
      showAzureList(listBox, type, id, related);
    });
    return button;
  });
  const marks = el("span", { id: "entity-badges" }, badges(props));
  const mark = ownedButton(id, Boolean(props.isOwnedObject), (owned) => {
    marks.replaceChildren(badges({ ...props, isOwnedObject: owned }));
  }, "entity-mark-owned");
  page.append(
    el("h1", { class: "entity-name" }, props.name || objectId, marks),
    el("p", { class: "muted" }, `${entity.kind} · ${id} `, mark),
    el("div", { class: "entity-columns" },
      el("section", { class: "card" }, el("h2", {}, "Properties"),
        el("dl", { class: "properties" }, Object.entries(props).map(([name, value]) => [el("dt", {}, name), el("dd", {}, propertyValue(value, name))]))),
      el("section", { class: "card grow" }, el("h2", {}, "Lists"), el("div", { class: "list-buttons" }, buttons), listBox),
    ),
  );
  buttons.find((button) => button.dataset.list === opened)?.click();
}

// #/entity/search/<text>, #/entity/<segment>/<object id>[/<list>], or
// #/entity/azure/<type>/<object id>[/<list>]
export async function showEntities(page, rest, current) {
  const [mode, ...id] = rest;
  const query = mode === "search" ? id.join("/") : "";
  page.append(el("h1", {}, "Entities"), searchForm(query));
  if (mode === "search" && query) {
    await showResults(page, query, current);
  } else if (mode === "azure" && Object.values(AZURE_TYPES).includes(id[0]) && id.length > 1) {
    clear(page);
    page.append(searchForm(""));
    await showAzureEntity(page, id[0], id[1], id[2], current);
  } else if (mode && Object.values(SEGMENTS).includes(mode) && id.length) {
    clear(page);
    page.append(searchForm(""));
    await showEntity(page, mode, id[0], id[1], current);
  }
}
