// The API as the signed-in user sees it. The session's JWT is kept in this tab's
// sessionStorage only (never localStorage, a cookie or a URL): it ends with the tab.

const SESSION_KEY = "graphsvc.session";
const USER_KEY = "graphsvc.user";
const V2 = "/api/v2";

export class ApiFailure extends Error {
  constructor(status, message, context) {
    super(message);
    this.status = status;
    this.context = context;
  }
}

export function sessionToken() {
  return sessionStorage.getItem(SESSION_KEY);
}

export function signedInUser() {
  return sessionStorage.getItem(USER_KEY) || "";
}

let onSignedOut = () => {};

/** What to do when the server stops taking the session (it expired or was ended). */
export function whenSignedOut(callback) {
  onSignedOut = callback;
}

export async function signIn(username, secret) {
  const reply = await call("POST", "/login", {
    body: { login_method: "secret", username, secret },
    anonymous: true,
  });
  sessionStorage.setItem(SESSION_KEY, reply.data.session_token);
  sessionStorage.setItem(USER_KEY, username);
}

export async function signOut() {
  try {
    if (sessionToken()) await call("POST", "/logout");
  } catch {
    // The session may be over already; it is forgotten here either way.
  } finally {
    sessionStorage.removeItem(SESSION_KEY);
    sessionStorage.removeItem(USER_KEY);
  }
}

function address(path, query) {
  const url = new URL(V2 + path, window.location.origin);
  for (const [name, value] of Object.entries(query || {})) {
    if (value === undefined || value === null || value === "") continue;
    for (const each of Array.isArray(value) ? value : [value]) url.searchParams.append(name, each);
  }
  return url.pathname + url.search;
}

/** One API call; its JSON answer, or an ApiFailure with the server's message. */
export async function call(method, path, options = {}) {
  const headers = { Accept: "application/json", ...(options.headers || {}) };
  let body = options.rawBody;
  if (options.body !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(options.body);
  }
  const token = sessionToken();
  if (token && !options.anonymous) headers.Authorization = `Bearer ${token}`;
  let response;
  try {
    response = await fetch(address(path, options.query), { method, headers, body });
  } catch (error) {
    // fetch rejects both when the server is unreachable and when the browser refuses the
    // request itself (a header it cannot send): the message says which.
    throw new ApiFailure(0, `the request failed: ${error.message}`, "network");
  }
  const text = await response.text();
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = null;
  }
  if (!response.ok) {
    const detail = parsed && parsed.errors && parsed.errors[0];
    const message = detail ? detail.message : `HTTP ${response.status}`;
    if (response.status === 401 && !options.anonymous) {
      sessionStorage.removeItem(SESSION_KEY);
      sessionStorage.removeItem(USER_KEY);
      onSignedOut(message);
    }
    throw new ApiFailure(response.status, message, detail ? detail.context : "");
  }
  return parsed;
}

export const get = (path, query) => call("GET", path, { query });
