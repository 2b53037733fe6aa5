// The console's frame: sign-in, the navigation, and one page at a time chosen by the
// address's fragment (#/quality, #/entity/computers/S-1-5-...), so that links and the back
// button work without the server knowing the pages.

import { ApiFailure, get, sessionToken, signIn, signOut, signedInUser, whenSignedOut } from "./api.js";
import { clear, notice } from "./dom.js";
import { showCypher } from "./cypher.js";
import { showEntities } from "./entity.js";
import { showOverview } from "./overview.js";
import { showPaths } from "./paths.js";
import { showQuality } from "./quality.js";
import { showTags } from "./tags.js";
import { showTokens } from "./tokens.js";
import { showUploads } from "./uploads.js";

const PAGES = {
  overview: showOverview,
  quality: showQuality,
  entity: showEntities,
  paths: showPaths,
  tags: showTags,
  cypher: showCypher,
  tokens: showTokens,
  uploads: showUploads,
};

// What each page reads needs (the operations' permissions): a page the user may not read is
// left out of the navigation. Uploads: the job list is open to every user.
const NEEDS = {
  overview: "graphdb/Read",
  quality: "graphdb/Read",
  entity: "graphdb/Read",
  paths: "graphdb/Read",
  tags: "graphdb/Read",
  cypher: "graphdb/Read",
  tokens: "auth/CreateToken",
  uploads: null,
};

const byId = (id) => document.getElementById(id);
let permissions = null; // the signed-in user's, as "authority/Name", read once a session
let shown = 0; // counts pages shown, so that a slow page never draws over a newer one

function decoded(segment) {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment; // a malformed escape in a hand-made link: taken as written
  }
}

const allowed = (name) => NEEDS[name] === null || permissions.has(NEEDS[name]);

function route() {
  const [name, ...rest] = window.location.hash.replace(/^#\/?/, "").split("/");
  const first = Object.keys(PAGES).find(allowed);
  return { name: Object.hasOwn(PAGES, name) ? name : first, rest: rest.map(decoded) };
}

async function readPermissions() {
  const self = await get("/self");
  permissions = new Set(
    self.data.roles.flatMap((role) => role.permissions.map((p) => `${p.authority}/${p.name}`)),
  );
  for (const link of document.querySelectorAll("#nav a[data-page]")) {
    link.hidden = !allowed(link.dataset.page);
  }
}

async function showPage() {
  // First of all: a page still loading for the previous view (or a signed-out user) must
  // not draw once this one is shown.
  const mine = ++shown;
  const current = () => mine === shown;
  const signedIn = Boolean(sessionToken());
  byId("sign-in").hidden = signedIn;
  byId("nav").hidden = !signedIn;
  byId("sign-out").hidden = !signedIn;
  byId("who").textContent = signedIn ? signedInUser() : "";
  const page = clear(byId("page"));
  if (!signedIn) {
    permissions = null;
    byId("username").focus();
    return;
  }
  try {
    if (permissions === null) await readPermissions();
  } catch (error) {
    if (current()) page.append(notice(error.message));
    return;
  }
  if (!current()) return;
  const { name, rest } = route();
  for (const link of document.querySelectorAll("#nav a[data-page]")) {
    link.classList.toggle("current", link.dataset.page === name);
  }
  try {
    await PAGES[name](page, rest, current);
  } catch (error) {
    if (!current()) return;
    page.append(notice(error instanceof ApiFailure ? error.message : `the page failed: ${error.message}`));
    if (!(error instanceof ApiFailure)) console.error(error);
  }
}

byId("sign-in-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = event.target;
  const message = byId("sign-in-error");
  message.textContent = "";
  try {
    await signIn(form.username.value, form.secret.value);
    form.secret.value = "";
    await showPage();
  } catch (error) {
    message.textContent = error.message;
  }
});

byId("sign-out").addEventListener("click", async () => {
  await signOut();
  await showPage();
});

whenSignedOut((reason) => {
  byId("sign-in-error").textContent = `Signed out: ${reason}`;
  showPage();
});

window.addEventListener("hashchange", showPage);
showPage();
