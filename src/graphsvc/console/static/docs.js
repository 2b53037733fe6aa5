// Interactive API reference for graphsvc, served at /api/v2/docs.
//
// The OpenAPI document and every API response are data, never markup: they reach the page
// only as text nodes (el() of dom.js) or as values of harmless attributes. Nothing here uses
// innerHTML, and the page's Content-Security-Policy forbids inline script and style anyway.

import { append, el } from './dom.js';

const SPEC_URL = '/api/v2/spec/openapi.json';
const TOKEN_KEY = 'graphsvc.session'; // set by the web console (/ui/) in this tab's sessionStorage
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
const API_PREFIX = '/api/v2';
// Response headers worth showing after "Send"; graphsvc names its request id `RequestID`.
const SHOWN_HEADERS = ['content-type', 'etag', 'x-request-id', 'requestid', 'cache-control',
  'retry-after', 'location'];
const MAX_BODY_CHARS = 400000; // a larger answer is cut, so the page stays responsive

let spec = null; // the loaded document, for resolving $ref

// ---------------------------------------------------------------------------- DOM helpers

/** Text with `backticks` shown as code and blank lines as paragraph breaks: the only
 *  markup of the document's descriptions worth honouring, and safe to build as nodes. */
function richText(text, tag = 'div') {
  const box = el(tag, { class: 'rich' });
  for (const para of String(text).split(/\n\s*\n/)) {
    const p = el('p');
    String(para).split('`').forEach((part, i) => {
      if (part) append(p, [i % 2 ? el('code', null, part) : part.replace(/\s+/g, ' ')]);
    });
    box.appendChild(p);
  }
  return box;
}

/** The same, on one line, for short texts (a response's or a parameter's description). */
function inlineText(text, cls) {
  const span = el('span', { class: cls });
  String(text).replace(/\s+/g, ' ').split('`').forEach((part, i) => {
    if (part) append(span, [i % 2 ? el('code', null, part) : part]);
  });
  return span;
}

const slug = (s) => String(s).toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '');

// ---------------------------------------------------------------------- document access

/** The value a local JSON pointer (`#/components/...`) names, or undefined. */
function pointer(ref) {
  if (typeof ref !== 'string' || !ref.startsWith('#/')) return undefined;
  let node = spec;
  for (const raw of ref.slice(2).split('/')) {
    const key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    if (node == null || typeof node !== 'object' || !Object.prototype.hasOwnProperty.call(node, key)) return undefined;
    node = node[key];
  }
  return node;
}

/** Follow $ref of a parameter, response, request body... (a bounded number of times). */
function deref(obj) {
  for (let i = 0; i < 16 && obj && typeof obj === 'object' && obj.$ref; i++) {
    obj = pointer(obj.$ref) ?? { description: `unresolved reference ${obj.$ref}` };
  }
  return obj || {};
}

const refName = (ref) => String(ref).split('/').pop();

// ------------------------------------------------------------------------------ schemas

/** The variants of anyOf/oneOf other than `{type: "null"}`, or null if there are none. */
function nonNullVariants(s) {
  const list = s.anyOf || s.oneOf;
  return Array.isArray(list) ? list.filter((v) => !(v && v.type === 'null')) : null;
}

/** A short type for a schema: `string (uuid) | null`, `array<User>`, `PagedNodeList`. */
function typeLabel(s) {
  if (!s || typeof s !== 'object') return 'any';
  if (s.$ref) return refName(s.$ref);
  if (Array.isArray(s.anyOf || s.oneOf)) return (s.anyOf || s.oneOf).map(typeLabel).join(' | ');
  if (Array.isArray(s.allOf)) return s.allOf.map(typeLabel).join(' & ');
  let t = Array.isArray(s.type) ? s.type.join(' | ') : s.type;
  if (!t) {
    if (s.properties) t = 'object';
    else if (s.items) t = 'array';
    else if ('const' in s) t = typeof s.const;
    else t = 'any';
  }
  if (t === 'array' && s.items) return `array<${typeLabel(s.items)}>`;
  return s.format ? `${t} (${s.format})` : t;
}

/** The constraints of a schema (and of its only non-null variant) as short strings. */
function constraints(s) {
  const out = [];
  const variants = nonNullVariants(s);
  const inner = variants && variants.length === 1 ? variants[0] : null;
  for (const c of inner && !inner.$ref ? [s, inner] : [s]) {
    if (Array.isArray(c.enum)) out.push(`one of: ${c.enum.map((v) => JSON.stringify(v)).join(', ')}`);
    if ('const' in c) out.push(`= ${JSON.stringify(c.const)}`);
    if (c.minimum != null) out.push(`≥ ${c.minimum}`);
    if (c.exclusiveMinimum != null) out.push(`> ${c.exclusiveMinimum}`);
    if (c.maximum != null) out.push(`≤ ${c.maximum}`);
    if (c.exclusiveMaximum != null) out.push(`< ${c.exclusiveMaximum}`);
    if (c.minLength != null) out.push(`length ≥ ${c.minLength}`);
    if (c.maxLength != null) out.push(`length ≤ ${c.maxLength}`);
    if (c.minItems != null) out.push(`items ≥ ${c.minItems}`);
    if (c.maxItems != null) out.push(`items ≤ ${c.maxItems}`);
    if (c.pattern != null) out.push(`pattern ${c.pattern}`);
    if (c.readOnly) out.push('read-only');
    if (c.writeOnly) out.push('write-only');
    if (c.nullable) out.push('nullable');
    if (c.deprecated) out.push('deprecated');
  }
  if (s.default !== undefined) out.push(`default ${JSON.stringify(s.default)}`);
  return out;
}

/** Look through the wrappers that add no fields of their own ($ref, `X | null`, array<X>),
 *  so that expanding `data: array<User> | null` shows User's fields at once. `seen` holds
 *  the references open above this node: meeting one again is a cycle. */
function unwrap(schema, seen) {
  const refs = [];
  let s = schema;
  for (let i = 0; i < 16 && s && typeof s === 'object'; i++) {
    if (s.$ref) {
      if (seen.has(s.$ref) || refs.includes(s.$ref)) return { cycle: s.$ref, refs };
      refs.push(s.$ref);
      s = pointer(s.$ref) || {};
      continue;
    }
    const variants = nonNullVariants(s);
    if (variants && variants.length === 1) { s = variants[0]; continue; }
    if (s.items && !s.properties && (s.type === 'array' || !s.type)) { s = s.items; continue; }
    break;
  }
  return { schema: s || {}, refs };
}

/** The named sub-schemas shown under a (unwrapped) schema. */
function schemaChildren(s) {
  const kids = [];
  const required = new Set(Array.isArray(s.required) ? s.required : []);
  for (const [name, sub] of Object.entries(s.properties || {})) {
    kids.push({ name, schema: sub, required: required.has(name) });
  }
  if (s.additionalProperties && typeof s.additionalProperties === 'object') {
    kids.push({ name: '[any key]', schema: s.additionalProperties });
  }
  for (const key of ['allOf', 'anyOf', 'oneOf']) {
    const list = key === 'allOf' ? s.allOf : nonNullVariants(s);
    if (Array.isArray(list) && (key === 'allOf' || list.length > 1)) {
      list.forEach((sub, i) => kids.push({ name: `${key}[${i}]`, schema: sub }));
    }
  }
  return kids;
}

/** One line of the schema tree: name, required mark, type, constraints, description. */
function schemaRow(name, schema, required, description) {
  return el('span', { class: 'sch-row' },
    name != null ? el('span', { class: 'sch-name' }, name) : null,
    required ? el('span', { class: 'sch-req', title: 'required' }, '*') : null,
    el('span', { class: 'sch-type' }, typeLabel(schema)),
    constraints(schema).map((c) => el('span', { class: 'chip' }, c)),
    description ? inlineText(description, 'sch-desc') : null);
}

/** A collapsible node of the schema tree. Children are built the first time the node is
 *  opened: the document's schemas reach each other through many paths, and building every
 *  tree up front would make thousands of nodes nobody looks at. */
function schemaNode(name, schema, { required = false, seen = new Set(), open = false } = {}) {
  const u = unwrap(schema, seen);
  if (u.cycle) {
    return el('div', { class: 'sch-leaf' }, schemaRow(name, schema, required),
      el('span', { class: 'chip cycle' }, `↻ ${refName(u.cycle)} (recursive, see above)`));
  }
  const description = schema.description || (name == null || schema.$ref ? u.schema.description : null);
  const row = schemaRow(name, schema, required, description);
  const kids = schemaChildren(u.schema);
  if (!kids.length || seen.size > 24) return el('div', { class: 'sch-leaf' }, row);

  const below = new Set([...seen, ...u.refs]);
  const box = el('div', { class: 'sch-children' });
  const build = () => {
    if (box.childElementCount) return;
    for (const k of kids) box.appendChild(schemaNode(k.name, k.schema, { required: k.required, seen: below }));
  };
  const node = el('details', { class: 'sch', ontoggle: () => node.open && build() },
    el('summary', null, row), box);
  if (open) { node.open = true; build(); }
  return node;
}

/** A JSON value to start a request body from: defaults, examples, or a blank of each type. */
function example(schema, seen = new Set(), depth = 0) {
  const s = schema && typeof schema === 'object' ? schema : {};
  if (s.$ref) {
    if (seen.has(s.$ref) || depth > 8) return null;
    return example(pointer(s.$ref), new Set([...seen, s.$ref]), depth + 1);
  }
  if (s.example !== undefined) return s.example;
  if (Array.isArray(s.examples) && s.examples.length) return s.examples[0];
  if (s.default !== undefined) return s.default;
  if ('const' in s) return s.const;
  if (Array.isArray(s.enum) && s.enum.length) return s.enum[0];
  const variants = nonNullVariants(s);
  if (variants) return variants.length ? example(variants[0], seen, depth + 1) : null;
  if (Array.isArray(s.allOf)) {
    return Object.assign({}, ...s.allOf.map((p) => example(p, seen, depth + 1)).filter((v) => v && typeof v === 'object'));
  }
  const type = Array.isArray(s.type) ? s.type.find((t) => t !== 'null') : s.type;
  if (type === 'object' || s.properties) {
    const out = {};
    for (const [k, sub] of Object.entries(s.properties || {})) out[k] = example(sub, seen, depth + 1);
    return out;
  }
  if (type === 'array') {
    const item = depth > 8 ? null : example(s.items, seen, depth + 1);
    return item == null ? [] : [item];
  }
  if (type === 'integer' || type === 'number') return s.minimum ?? 0;
  if (type === 'boolean') return false;
  if (type === 'string') return '';
  return null;
}

// --------------------------------------------------------------------------- operations

/** Every operation of the document, with its path-level parameters merged in. */
function collectOperations(doc) {
  const ops = [];
  for (const [path, rawItem] of Object.entries(doc.paths || {})) {
    const item = deref(rawItem);
    for (const method of METHODS) {
      const op = item[method];
      if (!op || typeof op !== 'object') continue;
      // Operation parameters override path-level ones of the same name and location.
      const params = new Map();
      for (const p of [...(item.parameters || []), ...(op.parameters || [])].map(deref)) {
        params.set(`${p.in}:${p.name}`, p);
      }
      ops.push({
        method, path, op, params: [...params.values()],
        id: op.operationId || `${method}-${path}`,
        group: groupOf(path, op),
        security: op.security ?? doc.security,
      });
    }
  }
  return ops;
}

/** The first tag, else the first path segment after /api/v2 (or the first segment). */
function groupOf(path, op) {
  if (Array.isArray(op.tags) && op.tags.length) return String(op.tags[0]);
  const rest = path.startsWith(API_PREFIX + '/') ? path.slice(API_PREFIX.length) : path;
  return rest.split('/').filter(Boolean)[0] || '/';
}

/** The permission an operation needs: an `x-…permission…` extension if the document has
 *  one, else the backticked names in its "Requires the permission `…`" sentence. */
function permissionOf(op) {
  const key = Object.keys(op).find((k) => /^x-.*permission/i.test(k));
  if (key) return [].concat(op[key]).map(String);
  const m = /requires the permissions?\b([^.\n]*)/i.exec(op.description || '');
  return m ? [...m[1].matchAll(/`([^`]+)`/g)].map((x) => x[1]) : [];
}

function securityText(security) {
  if (!Array.isArray(security)) return null;
  if (!security.length) return 'none (public)';
  return security.map((req) => Object.keys(req).join(' + ') || 'none').join('  or  ');
}

/** Whether a session JWT applies: the operation accepts an http bearer scheme, or says
 *  nothing about security. An explicitly public operation (security: []) gets no token. */
function takesBearer(security) {
  if (!Array.isArray(security)) return true;
  const schemes = spec.components?.securitySchemes || {};
  return security.some((req) => Object.keys(req).some((name) => {
    const s = deref(schemes[name]);
    return s.type === 'http' && String(s.scheme).toLowerCase() === 'bearer';
  }));
}

function paramsTable(params) {
  return el('table', { class: 'params' },
    el('thead', null, el('tr', null, ['Name', 'In', 'Type', 'Description'].map((h) => el('th', null, h)))),
    el('tbody', null, params.map((p) => el('tr', null,
      el('td', null, el('code', null, p.name), p.required ? el('span', { class: 'sch-req', title: 'required' }, '*') : null,
        p.deprecated ? el('span', { class: 'chip' }, 'deprecated') : null),
      el('td', null, p.in),
      el('td', null, el('span', { class: 'sch-type' }, typeLabel(p.schema)),
        constraints(p.schema || {}).map((c) => el('span', { class: 'chip' }, c))),
      el('td', null, p.description ? inlineText(p.description) : null)))));
}

function contentBlock(content, openFirst) {
  return Object.entries(content || {}).map(([media, m], i) => el('div', { class: 'media' },
    el('div', { class: 'media-type' }, media),
    m && m.schema ? schemaNode(null, m.schema, { open: openFirst && i === 0 }) : null));
}

function responsesBlock(responses) {
  return el('div', { class: 'responses' }, Object.entries(responses || {}).map(([status, raw]) => {
    const r = deref(raw);
    const cls = /^[1-5]/.test(status) ? `s${status[0]}xx` : 'sdefault';
    const headers = Object.keys(r.headers || {});
    return el('div', { class: 'response' },
      el('div', { class: 'response-head' },
        el('span', { class: `status ${cls}` }, status),
        inlineText(r.description || '', 'response-desc'),
        headers.length ? el('span', { class: 'muted small' }, `headers: ${headers.join(', ')}`) : null),
      contentBlock(r.content, false));
  }));
}

function renderOperation(o) {
  const { op, method, path } = o;
  const perms = permissionOf(op);
  const sec = securityText(o.security);
  const body = op.requestBody ? deref(op.requestBody) : null;
  return el('details', {
    class: `op m-${method}${op.deprecated ? ' deprecated' : ''}`,
    id: `op-${o.id}`, 'data-operation-id': o.id, 'data-method': method, 'data-path': path,
  },
  el('summary', { class: 'op-summary' },
    el('span', { class: `method m-${method}` }, method.toUpperCase()),
    el('code', { class: 'path' }, path),
    el('span', { class: 'op-title' }, op.summary || ''),
    perms.map((p) => el('span', { class: 'perm', title: 'required permission' }, p))),
  el('div', { class: 'op-body' },
    el('div', { class: 'op-meta' },
      el('span', null, 'operationId ', el('code', null, o.id)),
      el('a', { class: 'permalink', href: `#op-${o.id}`, title: 'Link to this operation' }, '#'),
      perms.length ? el('span', null, 'permission ', perms.map((p) => el('code', null, p))) : null,
      sec ? el('span', null, `auth: ${sec}`) : null),
    op.description ? richText(op.description) : null,
    o.params.length ? [el('h4', null, 'Parameters'), paramsTable(o.params)] : null,
    body ? [el('h4', null, 'Request body', body.required ? el('span', { class: 'sch-req' }, '*') : null),
      body.description ? richText(body.description) : null,
      contentBlock(body.content, true)] : null,
    el('h4', null, 'Responses'), responsesBlock(op.responses),
    tryForm(o, body)));
}

// ------------------------------------------------------------------------------- Try it

function sessionToken() {
  try { return sessionStorage.getItem(TOKEN_KEY) || null; } catch { return null; }
}

/** The claims of a JWT, decoded only to show who is signed in and until when. */
function jwtClaims(token) {
  try {
    const part = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    return JSON.parse(atob(part + '='.repeat((4 - part.length % 4) % 4)));
  } catch { return {}; }
}

function renderAuthStatus() {
  const box = document.getElementById('auth-status');
  const token = sessionToken();
  box.replaceChildren();
  if (!token) {
    box.className = 'auth signed-out';
    append(box, ['Not signed in: Try it sends no credentials. ',
      el('a', { href: '/ui/' }, 'Sign in at /ui/'), ' (in this tab), then come back.']);
    return;
  }
  const claims = jwtClaims(token);
  const expired = typeof claims.exp === 'number' && claims.exp * 1000 < Date.now();
  box.className = `auth ${expired ? 'signed-out' : 'signed-in'}`;
  append(box, [expired ? 'Session expired' : 'Signed in',
    sessionStorage.getItem('graphsvc.user') || claims.sub
      ? [' as ', el('code', null, sessionStorage.getItem('graphsvc.user') || String(claims.sub))]
      : null,
    typeof claims.exp === 'number' ? `, until ${new Date(claims.exp * 1000).toLocaleString()}` : null,
    '. Try it sends this session. ',
    el('a', { href: '/ui/' }, expired ? 'Sign in again at /ui/' : 'Console at /ui/')]);
}

/** An input for one parameter: a select for enums and booleans, a one-value-per-line
 *  textarea for arrays, a text box otherwise. */
function paramInput(p, id) {
  const s = unwrap(p.schema || {}, new Set()).schema;
  const attrs = { id, name: p.name, 'data-param-name': p.name, 'data-param-in': p.in, required: !!p.required && p.in === 'path' };
  const raw = p.schema || {};
  const enumValues = Array.isArray(s.enum) ? s.enum : s.type === 'boolean' ? [true, false] : null;
  if (enumValues && raw.type !== 'array') {
    return el('select', attrs, el('option', { value: '' }, '(not sent)'),
      enumValues.map((v) => el('option', { value: String(v), selected: raw.default === v }, String(v))));
  }
  const isArray = raw.type === 'array' || (p.schema && p.schema.items);
  if (isArray) return el('textarea', { ...attrs, rows: 2, class: 'param-array', placeholder: 'one value per line' });
  return el('input', { ...attrs, type: 'text', autocomplete: 'off', spellcheck: 'false',
    placeholder: raw.default !== undefined ? `default ${JSON.stringify(raw.default)}` : typeLabel(raw) });
}

function tryForm(o, body) {
  const form = el('form', { class: 'try', novalidate: true });
  const grid = el('div', { class: 'try-grid' });
  const inputs = o.params.map((p, i) => {
    const id = `try-${slug(o.id)}-${i}`;
    const input = paramInput(p, id);
    append(grid, [el('label', { for: id }, el('code', null, p.name), p.required ? el('span', { class: 'sch-req' }, '*') : null,
      el('span', { class: 'muted small' }, ` ${p.in}`)), input]);
    return { p, input };
  });
  let bodyArea = null;
  let mediaSelect = null;
  if (body && body.content) {
    const medias = Object.keys(body.content);
    const id = `try-${slug(o.id)}-body`;
    mediaSelect = el('select', { class: 'try-media', 'aria-label': 'Body media type' },
      medias.map((m) => el('option', { value: m }, m)));
    const first = body.content[medias[0]] || {};
    const start = /json/i.test(medias[0]) && first.schema && !(first.schema.format === 'binary')
      ? JSON.stringify(example(first.schema), null, 2) : '';
    bodyArea = el('textarea', { id, class: 'try-body', rows: 8, spellcheck: 'false' });
    bodyArea.value = start;
    append(grid, [el('label', { for: id }, 'body', body.required ? el('span', { class: 'sch-req' }, '*') : null),
      el('div', { class: 'try-body-box' }, mediaSelect, bodyArea)]);
  }
  const out = el('div', { class: 'try-output', hidden: true, 'aria-live': 'polite' });
  const button = el('button', { type: 'submit', class: 'try-send' }, 'Send');
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    send(o, inputs, bodyArea, mediaSelect, out, button);
  });
  return el('section', { class: 'try-box' }, el('h4', null, 'Try it'),
    append(form, [o.params.length || bodyArea ? grid : el('p', { class: 'muted small' }, 'No parameters.'),
      el('div', { class: 'try-actions' }, button,
        el('span', { class: 'muted small' }, takesBearer(o.security) ? '' : 'public operation: no credentials sent')),
      out]));
}

function showError(out, message) {
  out.hidden = false;
  out.dataset.status = 'error';
  out.replaceChildren(el('div', { class: 'try-status error' }, message));
}

async function send(o, inputs, bodyArea, mediaSelect, out, button) {
  const values = (input) => input.tagName === 'TEXTAREA'
    ? input.value.split('\n').map((v) => v.trim()).filter(Boolean) : [input.value].filter((v) => v !== '');
  // Path parameters, each percent-encoded: a value can never add a segment or a query.
  const missing = [];
  const pathValue = new Map(inputs.filter(({ p }) => p.in === 'path').map(({ p, input }) => [p.name, input.value]));
  const path = o.path.replace(/\{([^}]+)\}/g, (whole, name) => {
    const v = pathValue.get(name);
    if (!v) { missing.push(name); return whole; }
    // URL parsing would resolve these as dot segments, even percent-encoded.
    if (v === '.' || v === '..') { missing.push(`${name} (cannot be "${v}")`); return whole; }
    return encodeURIComponent(v);
  });
  const url = new URL(path, location.origin);
  const headers = new Headers({ Accept: 'application/json, */*;q=0.5' });
  for (const { p, input } of inputs) {
    const vs = values(input);
    if (!vs.length) { if (p.required && p.in !== 'path') missing.push(p.name); continue; }
    if (p.in === 'query') {
      // Arrays are repeated (explode, the default of form style) or joined with commas.
      if (p.explode === false) url.searchParams.append(p.name, vs.join(','));
      else for (const v of vs) url.searchParams.append(p.name, v);
    } else if (p.in === 'header') {
      try { headers.set(p.name, vs.join(', ')); } catch { return showError(out, `Header ${p.name}: invalid value`); }
    }
    // `cookie` parameters cannot be set from a page; they are left to the browser.
  }
  if (missing.length) return showError(out, `Missing or invalid: ${missing.join(', ')}`);

  const init = { method: o.method.toUpperCase(), headers, cache: 'no-store', credentials: 'same-origin', redirect: 'follow' };
  if (bodyArea && bodyArea.value.trim() !== '') {
    const media = mediaSelect.value;
    if (/json/i.test(media)) {
      try { JSON.parse(bodyArea.value); } catch (e) { return showError(out, `Body is not valid JSON: ${e.message}`); }
    }
    headers.set('Content-Type', media);
    init.body = bodyArea.value;
  }
  // Read the token at each send: the console may have signed in or out since the page loaded.
  const token = takesBearer(o.security) ? sessionToken() : null;
  if (token) headers.set('Authorization', `Bearer ${token}`);

  button.disabled = true;
  const started = performance.now();
  const requestLine = `${init.method} ${url.pathname}${url.search}`;
  try {
    const res = await fetch(url, init);
    const text = await res.text();
    renderResponse(out, res, text, requestLine, !!token, Math.round(performance.now() - started));
    if (res.status === 401) renderAuthStatus();
  } catch (e) {
    showError(out, `${requestLine}: request failed (${e.message})`);
  } finally {
    button.disabled = false;
  }
}

function renderResponse(out, res, text, requestLine, withToken, ms) {
  let shown = text;
  try { if (text.trim()) shown = JSON.stringify(JSON.parse(text), null, 2); } catch { /* not JSON: as sent */ }
  if (shown.length > MAX_BODY_CHARS) shown = `${shown.slice(0, MAX_BODY_CHARS)}\n… (${shown.length - MAX_BODY_CHARS} more characters not shown)`;
  const cls = `s${String(res.status)[0]}xx`;
  out.hidden = false;
  out.dataset.status = String(res.status);
  out.replaceChildren(
    el('div', { class: 'try-request' }, el('code', null, requestLine),
      el('span', { class: 'muted small' }, withToken ? '  with Bearer token' : '  without credentials')),
    el('div', { class: 'try-status' }, el('span', { class: `status ${cls}` }, res.status),
      ` ${res.statusText}`, el('span', { class: 'muted small' }, `  ${ms} ms`)),
    el('dl', { class: 'try-headers' }, SHOWN_HEADERS.filter((h) => res.headers.has(h))
      .map((h) => [el('dt', null, h), el('dd', null, res.headers.get(h))])),
    el('pre', { class: 'try-body-out' }, shown || '(no body)'));
}

// --------------------------------------------------------------------------------- page

function renderInfo(doc) {
  const info = doc.info || {};
  document.title = `${info.title || 'API'} ${info.version || ''} · reference`.trim();
  document.getElementById('api-title').textContent = info.title || 'API reference';
  document.getElementById('api-version').textContent =
    [info.version && `version ${info.version}`, doc.openapi && `OpenAPI ${doc.openapi}`].filter(Boolean).join(' · ');
  const desc = document.getElementById('api-description');
  desc.replaceChildren(info.description ? richText(info.description) : '',
    el('p', { class: 'muted small' }, 'Document: ', el('a', { href: SPEC_URL }, SPEC_URL)));
}

function renderOperations(doc) {
  const ops = collectOperations(doc);
  // Groups in the order of the document's `tags`, then in order of first appearance.
  const order = (doc.tags || []).map((t) => String(t.name));
  const groups = new Map(order.map((name) => [name, []]));
  for (const o of ops) {
    if (!groups.has(o.group)) groups.set(o.group, []);
    groups.get(o.group).push(o);
  }
  const tagInfo = new Map((doc.tags || []).map((t) => [String(t.name), t]));
  const container = document.getElementById('operations');
  const nav = document.getElementById('group-nav');
  const entries = []; // what the filter needs for each operation
  const sections = [];
  for (const [name, list] of groups) {
    if (!list.length) continue;
    const gid = `group-${slug(name) || 'root'}`;
    const count = el('span', { class: 'count' }, list.length);
    const navItem = el('li', null, el('a', { href: `#${gid}` }, name), count);
    nav.appendChild(navItem);
    const section = el('section', { class: 'group', id: gid, 'data-group': name },
      el('h2', null, name),
      tagInfo.get(name)?.description ? richText(tagInfo.get(name).description) : null,
      list.map((o) => {
        const node = renderOperation(o);
        entries.push({ node, text: [o.method, o.path, o.op.summary, o.id].join(' ').toLowerCase() });
        return node;
      }));
    sections.push({ section, navItem, count, nodes: entries.slice(-list.length).map((e) => e.node) });
    container.appendChild(section);
  }
  return { entries, sections, total: ops.length };
}

function setupFilter({ entries, sections, total }) {
  const input = document.getElementById('filter');
  const counter = document.getElementById('filter-count');
  const apply = () => {
    const terms = input.value.toLowerCase().split(/\s+/).filter(Boolean);
    let shown = 0;
    for (const e of entries) {
      e.node.hidden = !terms.every((t) => e.text.includes(t));
      if (!e.node.hidden) shown++;
    }
    for (const g of sections) {
      const n = g.nodes.filter((node) => !node.hidden).length;
      g.section.hidden = n === 0;
      g.navItem.hidden = n === 0;
      g.count.textContent = String(n);
    }
    counter.textContent = terms.length ? `${shown} of ${total} operations` : `${total} operations`;
  };
  input.addEventListener('input', apply);
  // "/" focuses the filter, as on many documentation sites; Escape clears it.
  document.addEventListener('keydown', (e) => {
    if (e.key === '/' && !/^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement?.tagName || '')) {
      e.preventDefault();
      input.focus();
    }
  });
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') { input.value = ''; apply(); }
  });
  apply();
}

/** Open and show the operation a `#op-…` address names. */
function openFromHash() {
  let id;
  try {
    id = decodeURIComponent(location.hash.slice(1));
  } catch {
    return; // a malformed escape names no operation
  }
  const target = id && document.getElementById(id);
  if (target && target.tagName === 'DETAILS') {
    target.open = true;
    target.scrollIntoView({ block: 'start' });
  }
}

async function main() {
  renderAuthStatus();
  // The console may sign in or out in this tab while the page is in the back/forward cache.
  window.addEventListener('pageshow', renderAuthStatus);
  document.addEventListener('visibilitychange', () => { if (!document.hidden) renderAuthStatus(); });
  const status = document.getElementById('load-status');
  try {
    const res = await fetch(SPEC_URL, { headers: { Accept: 'application/json' }, credentials: 'omit' });
    if (!res.ok) throw new Error(`${res.status} ${res.statusText}`);
    spec = await res.json();
  } catch (e) {
    status.textContent = `Could not load ${SPEC_URL}: ${e.message}`;
    status.className = 'error';
    return;
  }
  renderInfo(spec);
  const index = renderOperations(spec);
  setupFilter(index);
  status.hidden = true;
  window.addEventListener('hashchange', openFromHash);
  openFromHash();
  document.body.dataset.ready = 'true'; // for browser tests: the operations are on the page
}

main();
