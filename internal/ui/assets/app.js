// The devloop dashboard. Every value from the cluster is set with
// textContent or an attribute, never parsed as HTML: an environment's
// message is data, not markup.
'use strict';

const state = { envs: new Map(), events: new Map(), timelines: new Map(), problems: new Map(), token: '', synced: false };
let renderQueued = false;
let logAbort = null;

function el(tag, attrs, ...children) {
  const e = tag === 'svg' || attrs && attrs.svg ? document.createElementNS('http://www.w3.org/2000/svg', tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'svg' || v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) on(e, k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}
const svg = (tag, attrs, ...c) => el(tag, Object.assign({ svg: true }, attrs), ...c);

// on sets an element's handler for an event through one listener that
// calls e._on[type]: patch hands a kept element the new render's handlers
// (they hold the newest status) without stacking listeners.
function on(e, type, fn) {
  if (!e._on) e._on = {};
  if (!(type in e._on)) e.addEventListener(type, ev => { const f = e._on[type]; if (f) f(ev); });
  e._on[type] = fn;
}

// ---- updating the page in place ----
// A live update re-renders the view into new nodes, then patch carries
// the differences into the nodes on the page: an element with the same
// key (its tag and id or data- key) is kept and updated, so a field being
// typed into keeps its focus, caret and text, a selection stays, an open
// panel stays open; only what changed is touched.
const KEY_ATTRS = ['id', 'data-env', 'data-resource', 'data-spec', 'data-values', 'data-suite', 'data-suite-card', 'data-runs', 'data-run', 'data-node', 'data-change', 'data-component', 'data-objects', 'data-object', 'data-port', 'data-key', 'name'];

function keyOf(n) {
  if (n.nodeType !== 1) return '#' + n.nodeType;
  for (const a of KEY_ATTRS) if (n.hasAttribute(a)) return n.nodeName + '|' + a + '=' + n.getAttribute(a);
  return n.nodeName;
}

// patch makes parent's children look like children (new, unattached).
function patch(parent, ...children) {
  const want = children.flat().filter(c => c !== null && c !== undefined && c !== false).map(c => c instanceof Node ? c : document.createTextNode(String(c)));
  const pool = new Map();
  for (const o of [...parent.childNodes]) { const k = keyOf(o); if (!pool.has(k)) pool.set(k, []); pool.get(k).push(o); }
  let at = parent.firstChild;
  for (const n of want) {
    const same = pool.get(keyOf(n));
    const o = same && same.length ? same.shift() : null;
    const node = o ? update(o, n) : n;
    if (node !== at) parent.insertBefore(node, at); else at = at.nextSibling;
  }
  for (const rest of pool.values()) for (const o of rest) o.remove();
}

// update carries n's attributes, handlers and children into o; returns o.
// A <details> panel's open state is the user's: they open and close it
// (a panel that loads on opening tracks that through its toggle), and a
// render that does not say open must not close it under them.
function update(o, n) {
  if (o.nodeType !== 1) { if (o.nodeValue !== n.nodeValue) o.nodeValue = n.nodeValue; return o; }
  const theirs = a => a === 'open' && o.nodeName === 'DETAILS';
  for (const a of [...o.attributes]) if (!n.hasAttribute(a.name) && !theirs(a.name)) o.removeAttribute(a.name);
  for (const a of n.attributes) if (o.getAttribute(a.name) !== a.value && !theirs(a.name)) o.setAttribute(a.name, a.value);
  if (n._on) for (const [type, fn] of Object.entries(n._on)) on(o, type, fn);
  patch(o, ...n.childNodes);
  return o;
}

function ago(t) {
  if (!t) return '';
  const s = Math.max(0, (Date.now() - new Date(t).getTime()) / 1000);
  if (s < 60) return Math.round(s) + 's';
  if (s < 3600) return Math.round(s / 60) + 'm';
  if (s < 86400) return (s / 3600).toFixed(1) + 'h';
  return (s / 86400).toFixed(1) + 'd';
}
const short = d => d ? String(d).replace(/^sha256:/, '').slice(0, 12) : '';

// ---- session and live data ----
// The URL the plugin opened carries a one-time code; the page trades it
// for a token of its own, kept in this tab's sessionStorage (it survives
// a reload) and sent as a header on every request: never a cookie, which
// the browser would also send to any other server on 127.0.0.1.
const TOKEN_KEY = 'devloop-token';

async function session() {
  const u = new URL(location.href);
  const code = u.searchParams.get('code');
  if (code) {
    // Out of the address bar and the history before anything else.
    history.replaceState(null, '', u.pathname + u.hash);
    const r = await fetch('/session', { method: 'POST', headers: { 'X-Devloop-Code': code } });
    if (r.ok) sessionStorage.setItem(TOKEN_KEY, (await r.json()).token);
    else if (!sessionStorage.getItem(TOKEN_KEY)) { state.problems.set('session', (await r.text()).trim()); return false; }
  }
  state.token = sessionStorage.getItem(TOKEN_KEY);
  if (!state.token) { state.problems.set('session', 'No session: open the URL kubectl devloop ui printed.'); return false; }
  return true;
}

// api is fetch with the page's token.
function api(path, opts) {
  const o = Object.assign({}, opts);
  o.headers = Object.assign({ 'X-Devloop-Token': state.token }, o.headers);
  if (o.json !== undefined) { o.method = 'POST'; o.headers['Content-Type'] = 'application/json'; o.body = JSON.stringify(o.json); delete o.json; }
  return fetch(path, o);
}

// streamEvents reads path's server-sent events, calling on[event](data),
// until the stream ends or signal aborts (EventSource cannot send a
// header). opened is called once the server answered.
async function streamEvents(path, on, signal, opened) {
  const r = await api(path, { signal });
  if (!r.ok) { const e = new Error((await r.text()).trim() || r.statusText); e.status = r.status; throw e; }
  if (opened) opened();
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      let ev = 'message';
      const data = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('event: ')) ev = line.slice(7);
        else if (line.startsWith('data: ')) data.push(line.slice(6));
      }
      if (data.length && on[ev]) on[ev](data.join('\n'));
    }
  }
}

const sleep = ms => new Promise(r => setTimeout(r, ms));

// live follows the store; when the server is gone the page says so
// (Disconnected, the states greyed: they are no longer known) and retries.
async function live() {
  for (;;) {
    let seen = null;
    try {
      await streamEvents('/api/stream', {
        update: d => { const u = JSON.parse(d); if (seen) seen.add(u.kind + ' ' + u.key); apply(u); queueRender(); },
        synced: () => {
          // A reconnect resends everything: drop what is gone meanwhile.
          for (const [name, m] of [['env', state.envs], ['events', state.events], ['timeline', state.timelines]]) for (const k of [...m.keys()]) if (!seen.has(name + ' ' + k)) m.delete(k);
          seen = null; state.synced = true; queueRender();
        },
      }, undefined, () => { seen = new Set(); setConnected(true); });
    } catch (e) {
      if (e.status === 401) { state.problems.set('session', e.message); setConnected(false); render(); return; }
    }
    state.synced = false;
    setConnected(false);
    await sleep(2000);
  }
}

function setConnected(ok) {
  const conn = document.getElementById('conn');
  conn.textContent = ok ? 'live' : 'Disconnected: retrying…';
  conn.classList.toggle('offline', !ok);
  document.body.classList.toggle('offline', !ok);
}

async function start() {
  if (!await session()) { render(); return; }
  const s = state.scope = await api('/api/session').then(r => r.json());
  document.getElementById('scope').textContent = (s.namespace ? 'namespace ' + s.namespace : 'all namespaces') + (s.selector ? ' · ' + s.selector : '');
  live();
  document.getElementById('newtab').addEventListener('click', newTab);
  loadForwards();
  // "idle" and "ago" count on a quiet page: a render each second patches
  // only the texts that changed.
  setInterval(queueRender, 1000);
  // The forwards' lines (which pod, waiting for one) change on their own.
  setInterval(() => { if (forwards.length) loadForwards(); }, 2000);
  window.addEventListener('hashchange', () => { closeLogs(); render(); document.getElementById('main').focus(); });
  render();
}

// newTab opens the dashboard in another tab: a fresh one-time URL (the
// token is this tab's).
async function newTab(ev) {
  ev.preventDefault();
  const r = await api('/api/session/code', { method: 'POST' });
  if (r.ok) window.open((await r.json()).url + location.hash, '_blank', 'noopener');
}

function apply(u) {
  switch (u.kind) {
    case 'env': state.envs.set(u.key, u.data); break;
    case 'env-delete': state.envs.delete(u.key); break;
    case 'events': state.events.set(u.key, u.data || []); break;
    case 'timeline': state.timelines.set(u.key, u.data || []); break;
    case 'problem': if (u.data) state.problems.set(u.key, u.data); else state.problems.delete(u.key); break;
  }
}

function queueRender() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => { renderQueued = false; render(); });
}

function route() {
  const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  if (parts[0] === 'env' && parts.length >= 3) return { page: 'env', key: parts[1] + '/' + parts[2], tab: parts[3] || 'graph', sel: parts[4] || '' };
  return { page: 'list' };
}

function render() {
  const p = document.getElementById('problems');
  patch(p, [...state.problems.values()].map(m => el('div', { class: 'problem' }, m)));
  renderSummary();
  const r = route();
  if (r.page === 'env') renderEnv(r); else renderList();
}

// ---- the list ----
const filters = { ns: '', label: '', text: '' };

function renderList() {
  const main = document.getElementById('main');
  let table = document.getElementById('envs');
  if (!table) {
    const f = (key, label) => el('input', { 'aria-label': label, placeholder: label, value: filters[key], oninput: e => { filters[key] = e.target.value; renderRows(); } });
    table = el('table', { id: 'envs' }, el('thead', null, el('tr', null, ['Environment', 'State', 'Components', 'Last push', 'Last test', 'Idle'].map(h => el('th', { scope: 'col' }, h)))), el('tbody'));
    main.replaceChildren(el('h1', null, 'Environments'), el('div', { class: 'filters' }, f('ns', 'namespace'), f('label', 'label (k=v)'), f('text', 'text')), table);
  }
  renderRows();
}

function matches(v) {
  if (filters.ns && !v.namespace.includes(filters.ns)) return false;
  if (filters.label) {
    const [k, val] = filters.label.split('=');
    const have = (v.labels || {})[k.trim()];
    if (have === undefined || (val !== undefined && have !== val.trim())) return false;
  }
  if (filters.text) {
    const t = filters.text.toLowerCase();
    if (!(v.key + ' ' + (v.message || '') + ' ' + v.state).toLowerCase().includes(t)) return false;
  }
  return true;
}

function renderRows() {
  const tbody = document.querySelector('#envs tbody');
  if (!tbody) return;
  const rows = [...state.envs.values()].filter(matches).sort((a, b) => a.key.localeCompare(b.key)).map(v => el('tr', { 'data-env': v.key },
    el('td', null, el('a', { href: '#/env/' + encodeURIComponent(v.namespace) + '/' + encodeURIComponent(v.name) }, v.key)),
    el('td', null, el('span', { class: 'state s-' + v.state }, v.state), v.message ? el('div', { class: 'msg' }, v.message) : null),
    el('td', null, v.componentsReady || ''),
    el('td', { 'data-col': 'push' }, pushCell(lastPushOf(v))),
    el('td', null, v.lastTest || ''),
    el('td', null, v.lastActivity ? ago(v.lastActivity) : '')));
  if (rows.length === 0) rows.push(el('tr', null, el('td', { colspan: 6, class: 'muted' }, !state.synced ? 'Loading…' : state.envs.size ? 'No environments you can see match the filters.' : noEnvironments())));
  patch(tbody, rows);
}

// lastPushOf is the newest change of the timeline (what the operator
// recorded of the push: source, revision, start) or else status' newest
// resolved revision.
function lastPushOf(v) {
  const c = (state.timelines.get(v.key) || [])[0];
  const p = v.lastPush;
  if (c && (!p || new Date(c.started) >= new Date(p.when))) return { source: c.source, revision: c.revision, when: c.started };
  return p;
}

function pushCell(p) {
  if (!p) return '';
  return [el('span', { class: 'mono' }, p.source + ' ' + short(String(p.revision).split('@').pop())), ' ', el('span', { class: 'muted', 'data-ago': p.when }, ago(p.when) + ' ago')];
}

// noEnvironments says where else to look when the scope is empty.
function noEnvironments() {
  const s = state.scope || {};
  if (!s.namespace) return 'No environments in any namespace you can list' + (s.selector ? ' with labels ' + s.selector : '') + '.';
  return 'No environments in namespace ' + s.namespace + (s.selector ? ' with labels ' + s.selector : '') + '. Another namespace: kubectl devloop ui -n NAMESPACE; every namespace you may list: kubectl devloop ui -A.';
}

// ---- one environment ----
function renderEnv(r) {
  const main = document.getElementById('main');
  const v = state.envs.get(r.key);
  if (!v) { patch(main, el('p', null, state.synced ? 'No environment ' + r.key + ' that you can see.' : 'Loading…'), el('a', { href: '#/' }, 'All environments')); return; }
  const base = '#/env/' + encodeURIComponent(v.namespace) + '/' + encodeURIComponent(v.name) + '/';
  const tabs = ['graph', 'components', 'tests', 'logs', 'timeline', 'events'];
  // The logs tab keeps its stream and DOM across updates.
  if (r.tab === 'logs' && document.getElementById('logview') && document.getElementById('logview').dataset.env === v.key) {
    patch(document.getElementById('envstate'), envState(v));
    patch(document.getElementById('resources'), resourceList(v, r));
    return;
  }
  const body = { graph: renderGraph, components: renderComponents, tests: renderTests, logs: renderLogs, timeline: renderTimeline, events: renderEvents }[r.tab] || renderGraph;
  patch(main, el('div', { class: 'envpage' },
    // The resource list stays beside whatever the detail shows.
    el('nav', { id: 'resources', 'aria-label': 'resources' }, resourceList(v, r)),
    el('div', { class: 'detail' },
      el('p', null, el('a', { href: '#/' }, '← all environments')),
      el('h1', null, v.key),
      el('div', { id: 'envstate' }, ...envState(v)),
      el('nav', { class: 'tabs', 'aria-label': 'views' }, tabs.map(t => el('a', { href: base + t, 'aria-current': t === r.tab ? 'page' : null }, t))),
      // Keyed by environment and tab: another tab is new nodes.
      el('div', { 'data-key': v.key + ' ' + r.tab }, body(v, r)))));
  if (r.sel && r.sel !== scrolledTo) {
    const card = document.querySelector(`[data-component="${CSS.escape(r.sel)}"], [data-suite-card="${CSS.escape(r.sel)}"]`);
    if (card) { scrolledTo = r.sel; card.scrollIntoView({ block: 'nearest' }); }
  }
}
let scrolledTo = '';

function envState(v) {
  return [el('span', { class: 'state s-' + v.state, id: 'env-state' }, v.state), ' ', el('span', { class: 'msg', id: 'env-message' }, v.message || ''),
    el('div', { class: 'muted' }, 'components ready ' + (v.componentsReady || '-') + (v.lastActivity ? ' · idle ' + ago(v.lastActivity) : ''))];
}

start();
