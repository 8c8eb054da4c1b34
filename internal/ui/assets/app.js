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
function update(o, n) {
  if (o.nodeType !== 1) { if (o.nodeValue !== n.nodeValue) o.nodeValue = n.nodeValue; return o; }
  for (const a of [...o.attributes]) if (!n.hasAttribute(a.name)) o.removeAttribute(a.name);
  for (const a of n.attributes) if (o.getAttribute(a.name) !== a.value) o.setAttribute(a.name, a.value);
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

// ---- what needs attention, over every environment in scope ----
// Stalled first, then Reconciling; the page's title and favicon take the
// worst state, so a tab in the background says when something broke.
const SEVERITY = { Stalled: 0, NotReady: 1, Reconciling: 2, Unknown: 3, Ready: 4 };
const FAVICON = { Stalled: '#cf222e', NotReady: '#cf222e', Reconciling: '#bf8700', Ready: '#1a7f37', Unknown: '#6e7781' };

function renderSummary() {
  const box = document.getElementById('summary');
  if (!box || !state.synced) return;
  const envs = [...state.envs.values()].sort((a, b) => (SEVERITY[a.state] ?? 3) - (SEVERITY[b.state] ?? 3) || a.key.localeCompare(b.key));
  const count = {};
  for (const v of envs) count[v.state] = (count[v.state] || 0) + 1;
  const worst = envs.length ? envs[0].state : 'Unknown';
  const bad = envs.filter(v => v.state === 'Stalled' || v.state === 'NotReady');
  const order = Object.keys(count).sort((a, b) => (SEVERITY[a] ?? 3) - (SEVERITY[b] ?? 3));
  patch(box, el('span', { class: 'muted' }, 'needs attention: '),
    order.flatMap((st, i) => [i ? ' · ' : '', el('span', { class: 'state s-' + st, 'data-count': st }, count[st] + ' ' + st)]),
    envs.length ? null : el('span', { class: 'muted' }, 'no environments'),
    bad.slice(0, 5).flatMap(v => [' ', el('a', { href: '#/env/' + encodeURIComponent(v.namespace) + '/' + encodeURIComponent(v.name), 'data-attention': v.key }, v.key)]),
    bad.length > 5 ? ' +' + (bad.length - 5) + ' more' : null);
  const n = bad.length, title = (n ? n + ' need attention · ' : count.Reconciling ? count.Reconciling + ' reconciling · ' : '') + 'devloop';
  if (document.title !== title) document.title = title;
  const icon = document.getElementById('favicon'), href = 'data:image/svg+xml,' + encodeURIComponent(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><circle cx="8" cy="8" r="7" fill="${FAVICON[worst] || FAVICON.Unknown}"/></svg>`);
  if (icon && icon.getAttribute('href') !== href) { icon.setAttribute('href', href); icon.dataset.state = worst; }
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

// resourceList: the environment's sources, components and tests with
// their phase, each a link selecting it, and a rebuild button per
// component that builds images.
function resourceList(v, r) {
  const base = '#/env/' + encodeURIComponent(v.namespace) + '/' + encodeURIComponent(v.name) + '/';
  const phase = new Map(v.graph.nodes.map(n => [n.id, n.phase]));
  const item = (id, name, href, extra) => el('li', { 'data-resource': id },
    el('a', { href, 'aria-current': r.sel === name && href.endsWith('/' + encodeURIComponent(name)) ? 'true' : null },
      el('span', { class: 'dot d-' + (phase.get(id) || 'Pending'), 'aria-hidden': 'true' }), name, ' ', el('span', { class: 'muted p-' + (phase.get(id) || 'Pending') }, phase.get(id) || '')), extra);
  return [
    el('h2', null, 'Resources'),
    el('ul', null,
      (v.object.spec.sources || []).map(s => item('source/' + s.name, s.name, base + 'timeline')),
      (v.object.spec.components || []).map(c => item('component/' + c.name, c.name, base + 'components/' + encodeURIComponent(c.name),
        (c.images || []).length ? rebuildButton(v, c.name, 'Rebuild') : null)),
      (v.object.spec.tests || []).map(t => item('test/' + t.name, t.name, base + 'tests/' + encodeURIComponent(t.name))))];
}

// rebuildButton asks the operator for a reconcile, as kubectl devloop
// push does after a push: the images are built again if their sources
// changed. One click, one request.
function rebuildButton(v, target, label) {
  const key = v.key + '#rebuild#' + target;
  return el('button', { type: 'button', class: 'small', 'data-rebuild': target, disabled: inFlight.has(key), title: 'request a reconcile (as kubectl devloop push does)',
    onclick: () => rebuild(v, target, key) }, label, el('span', { class: 'msg', 'data-rebuild-result': target }, actionResults.get(key) ? ' ' + actionResults.get(key) : ''));
}

async function rebuild(v, target, key) {
  if (inFlight.has(key)) return;
  inFlight.add(key);
  actionResults.set(key, '…');
  queueRender();
  try {
    const r = await api('/api/component', { json: ({ namespace: v.namespace, env: v.name, component: target, action: 'rebuild', requestId: crypto.randomUUID() }) });
    const j = await r.json();
    actionResults.set(key, j.error ? 'refused: ' + j.error : 'requested');
  } catch (e) { actionResults.set(key, 'failed: ' + e); }
  inFlight.delete(key);
  queueRender();
}

function envState(v) {
  return [el('span', { class: 'state s-' + v.state, id: 'env-state' }, v.state), ' ', el('span', { class: 'msg', id: 'env-message' }, v.message || ''),
    el('div', { class: 'muted' }, 'components ready ' + (v.componentsReady || '-') + (v.lastActivity ? ' · idle ' + ago(v.lastActivity) : ''))];
}

function renderGraph(v) {
  const g = v.graph;
  const cols = new Map();
  for (const n of g.nodes) { if (!cols.has(n.level)) cols.set(n.level, []); cols.get(n.level).push(n); }
  const W = 170, H = 44, GX = 60, GY = 18, pos = new Map();
  let maxRows = 0;
  for (const [lvl, ns] of cols) { ns.forEach((n, i) => pos.set(n.id, { x: 10 + lvl * (W + GX), y: 10 + i * (H + GY) })); maxRows = Math.max(maxRows, ns.length); }
  const width = 20 + Math.max(1, cols.size) * (W + GX), height = 20 + (Math.max(1, maxRows) + 1) * (H + GY);
  const base = '#/env/' + encodeURIComponent(v.namespace) + '/' + encodeURIComponent(v.name) + '/';
  const s = svg('svg', { class: 'graph', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': 'dependency graph of ' + v.key },
    svg('defs', null, svg('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto' }, svg('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrowhead' }))));
  for (const e of g.edges) {
    const a = pos.get(e.from), b = pos.get(e.to);
    if (!a || !b) continue;
    s.append(svg('path', { d: edgePath(b, a, cols, W, H, GX, GY), class: e.implicit ? 'implicit' : null, 'marker-end': 'url(#arrow)', 'data-edge': e.to + ' ' + e.from },
      svg('title', null, e.from + ' depends on ' + e.to + (e.implicit ? ' (implicit)' : ''))));
  }
  for (const n of g.nodes) {
    const p = pos.get(n.id);
    // Every node selects what it is: a component or test opens its card,
    // a source the timeline of what was pushed to it.
    const href = n.kind === 'component' ? base + 'components/' + encodeURIComponent(n.name) : n.kind === 'test' ? base + 'tests/' + encodeURIComponent(n.name) : base + 'timeline';
    const go = () => { location.hash = href; };
    const box = svg('g', { class: 'node n-' + n.phase, 'data-node': n.id, 'data-phase': n.phase, transform: `translate(${p.x},${p.y})`, tabindex: 0, role: 'link', 'aria-label': n.kind + ' ' + n.name + ' ' + n.phase + (n.waitingFor && n.waitingFor.length ? ', waits for ' + n.waitingFor.join(', ') : ''),
      onclick: go, onkeydown: e => { if (e.key === 'Enter') go(); } },
      svg('rect', { width: W, height: H, rx: 6 }),
      svg('text', { x: 8, y: 16, class: 'kind' }, n.kind),
      svg('text', { x: 8, y: 34 }, n.name.length > 20 ? n.name.slice(0, 19) + '…' : n.name + '  ' + n.phase),
      svg('title', null, n.id + ': ' + n.phase + (n.waitingFor ? ' (waits for ' + n.waitingFor.join(', ') + ')' : '')));
    s.append(box);
  }
  const blocked = g.nodes.filter(n => n.waitingFor && n.waitingFor.length);
  return el('section', null, g.error ? el('p', { class: 'problem' }, g.error) : null, s,
    blocked.length ? el('ul', null, blocked.map(n => el('li', null, n.name + ' waits for ', n.waitingFor.map((w, i) => [i ? ', ' : '', el('a', { href: '#', 'data-focus': 'component/' + w, onclick: ev => { ev.preventDefault(); focusNode('component/' + w); } }, w)])))) : null,
    el('p', { class: 'muted' }, 'Arrows run from what a node needs to the node. Dashed edges are implicit (an image a run template reads, an output used as a source). Click a node to select it.'));
}

// edgePath runs from the right of `from` to the left of `to`. An edge
// that skips columns passes each column between them through a gap
// between its nodes (the one nearest the straight line), never behind a
// node.
function edgePath(from, to, cols, W, H, GX, GY) {
  const pts = [[from.x + W, from.y + H / 2]];
  const c0 = Math.round((from.x - 10) / (W + GX)), c1 = Math.round((to.x - 10) / (W + GX));
  for (let c = c0 + 1; c < c1; c++) {
    const rows = (cols.get(c) || []).length;
    const t = (c - c0) / (c1 - c0), want = from.y + H / 2 + t * (to.y - from.y);
    let best = 10 - GY / 2;
    for (let i = 0; i < rows; i++) { const gap = 10 + i * (H + GY) + H + GY / 2; if (Math.abs(gap - want) < Math.abs(best - want)) best = gap; }
    const x = 10 + c * (W + GX);
    pts.push([x, best], [x + W, best]);
  }
  pts.push([to.x, to.y + H / 2]);
  let d = `M${pts[0][0]},${pts[0][1]}`;
  for (let i = 1; i < pts.length; i++) {
    const [x1, y1] = pts[i - 1], [x2, y2] = pts[i];
    // Between columns a curve; across a column (odd segments after the
    // first) a straight run through its gap.
    if (i % 2 === 0 && i < pts.length - 1) d += ` L${x2},${y2}`;
    else { const mx = (x1 + x2) / 2; d += ` C${mx},${y1} ${mx},${y2} ${x2},${y2}`; }
  }
  return d;
}

function focusNode(id) {
  const g = document.querySelector(`[data-node="${CSS.escape(id)}"]`);
  if (!g) return;
  g.focus();
  const n = g.querySelector('rect');
  n.setAttribute('stroke-width', '5'); setTimeout(() => n.setAttribute('stroke-width', '2'), 1500);
}

function renderComponents(v, r) {
  const o = v.object, st = o.status || {};
  return el('div', { class: 'cols' }, (o.spec.components || []).map(c => {
    const cs = (st.components || []).find(x => x.name === c.name) || {};
    return el('div', { class: 'card' + (r && r.sel === c.name ? ' selected' : ''), 'data-component': c.name },
      el('h3', null, c.name, ' ', el('span', { class: 'p-' + (cs.phase || 'Pending') }, cs.phase || 'Pending')),
      cs.message ? el('div', { class: 'msg' }, cs.message) : null,
      (cs.images || []).map(im => el('div', null,
        el('div', null, el('b', null, 'image ' + im.name), ' ', el('code', null, (im.repository || '') + '@' + short(im.digest)), ' ', rebuildButton(v, c.name + '/' + im.name, 'Rebuild ' + im.name)),
        im.tags ? el('div', { class: 'muted' }, 'tags: ' + im.tags.join(', ')) : null,
        im.build ? el('div', null, 'last build ', el('span', { class: 'p-' + im.build.result }, im.build.result), ' ' + (im.build.job || '') + ' ' + ago(im.build.completionTime || im.build.startTime) + ' ago') : null,
        im.updateReason ? el('div', { class: 'muted' }, 'update: ' + im.updateReason) : null)),
      cs.release ? el('div', null, 'release ' + cs.release.name + ' revision ' + cs.release.revision + ' ' + (cs.release.status || '')) : null,
      cs.inventory && cs.inventory.length ? renderObjects(v, c.name, cs.inventory, 'applied objects')
        : cs.release && (cs.release.workloads || []).length ? renderObjects(v, c.name, cs.release.workloads, 'workloads of the release') : null,
      (c.ports || []).length ? renderPorts(v, c) : null,
      renderEndpoints(v, c),
      componentButtons(v, c),
      el('details', { 'data-spec': c.name }, el('summary', null, 'spec'), el('pre', { class: 'tail' }, JSON.stringify(c, null, 2))),
      c.helm ? renderValues(v, c.name) : null);
  }));
}

// ---- endpoints: the Service ports in front of a component's pods ----
// Offered for a port-forward without a declared components[].ports
// entry; read as the user, again at most every 10 s while shown.
const endpointsOf = new Map();

function renderEndpoints(v, c) {
  const key = v.key + '#' + c.name, got = endpointsOf.get(key);
  if (!got || Date.now() - got.at > 10000) loadEndpoints(v, c.name, key);
  const eps = got && got.endpoints || [];
  if (!eps.length) return null;
  return el('div', { class: 'ports', 'data-endpoints': c.name }, el('b', null, 'endpoints'), eps.map(e => {
    const f = forwards.find(f => f.namespace === v.namespace && f.env === v.name && f.component === c.name && f.port === e.id);
    const rkey = v.key + '#' + c.name + '#' + e.id;
    return el('div', { 'data-port': c.name + '/' + e.id },
      e.id + (e.name ? ' (' + e.name + ')' : '') + ' ',
      f ? [el('a', { href: f.url, target: '_blank', rel: 'noopener noreferrer', 'data-url': f.url }, f.url), ' ',
        el('button', { type: 'button', 'data-forward': 'stop', onclick: () => forwardAct(v, c.name, e.id, 'stop') }, 'Stop'),
        f.status ? el('div', { class: 'msg' }, f.status) : null]
        : el('button', { type: 'button', 'data-forward': 'start', onclick: () => forwardAct(v, c.name, e.id, 'start') }, 'Port-forward'),
      el('span', { class: 'msg' }, actionResults.get(rkey) || ''));
  }));
}

const endpointsLoading = new Set();
async function loadEndpoints(v, comp, key) {
  if (endpointsLoading.has(key)) return;
  endpointsLoading.add(key);
  let got = { at: Date.now(), endpoints: [] };
  try { got = Object.assign(await api('/api/endpoints?' + new URLSearchParams({ namespace: v.namespace, env: v.name, component: comp })).then(r => r.json()), { at: Date.now() }); } catch (e) { /* none shown */ }
  const before = JSON.stringify((endpointsOf.get(key) || {}).endpoints || []);
  endpointsOf.set(key, got);
  endpointsLoading.delete(key);
  if (JSON.stringify(got.endpoints || []) !== before) queueRender();
}

// ---- a Helm component's values, as the operator passed them ----
// (read from the release Helm stored when the panel opens, as the user).
const openValues = new Set(), valuesOf = new Map();

function renderValues(v, comp) {
  const key = v.key + '#' + comp, got = valuesOf.get(key);
  const d = el('details', { 'data-values': comp, open: openValues.has(key) }, el('summary', null, 'Helm values'),
    !got ? el('div', { class: 'muted' }, 'reading…')
      : got.error ? el('div', { class: 'msg' }, 'could not read them: ' + got.error)
      : [el('div', { class: 'muted', 'data-values-from': got.from }, got.from === 'release' ? 'as the operator passed them to Helm: release ' + got.release + ' revision ' + got.revision : got.note),
        el('pre', { class: 'tail' }, JSON.stringify(got.values ?? {}, null, 2)),
        (got.valuesFrom || []).length ? el('div', { class: 'muted' }, 'then valuesFrom: ' + got.valuesFrom.join(', ')) : null,
        el('button', { type: 'button', onclick: () => loadValues(v, comp) }, 'Refresh')]);
  d.addEventListener('toggle', () => {
    if (d.open && !openValues.has(key)) { openValues.add(key); loadValues(v, comp); }
    else if (!d.open) openValues.delete(key);
  });
  return d;
}

async function loadValues(v, comp) {
  const key = v.key + '#' + comp;
  try {
    valuesOf.set(key, await api('/api/values?' + new URLSearchParams({ namespace: v.namespace, env: v.name, component: comp })).then(r => r.json()));
  } catch (e) { valuesOf.set(key, { error: String(e) }); }
  queueRender();
}

// ---- applied objects: read with their kstatus when the panel opens ----
// (a GET per object as the user, at most 50, on demand; not watched).
const openObjects = new Set(), objectStates = new Map();

function renderObjects(v, comp, inventory, what) {
  const key = v.key + '#' + comp, got = objectStates.get(key);
  const d = el('details', { 'data-objects': comp, open: openObjects.has(key) },
    el('summary', null, inventory.length + ' ' + what),
    got && got.error ? el('div', { class: 'msg' }, 'could not read them: ' + got.error) : null,
    got && got.objects ? el('table', { class: 'objects' }, el('tbody', null, got.objects.map(o =>
      el('tr', { 'data-object': o.kind + '/' + o.name },
        el('td', { class: 'mono' }, o.kind + ' ' + (o.namespace ? o.namespace + '/' : '') + o.name),
        el('td', { class: 'k-' + o.status }, o.status),
        el('td', { class: 'msg' }, o.message || ''))))) : null,
    got && got.more ? el('div', { class: 'muted' }, got.more + ' more not read (the panel reads at most 50)') : null,
    got ? el('button', { type: 'button', onclick: () => loadObjects(v, comp) }, 'Refresh') : el('div', { class: 'muted' }, 'reading…'),
    got ? null : el('ul', null, inventory.map(i => el('li', { class: 'mono' }, i.kind + ' ' + (i.namespace ? i.namespace + '/' : '') + i.name))));
  d.addEventListener('toggle', () => {
    if (d.open && !openObjects.has(key)) { openObjects.add(key); loadObjects(v, comp); }
    else if (!d.open) openObjects.delete(key);
  });
  return d;
}

async function loadObjects(v, comp) {
  const key = v.key + '#' + comp;
  try {
    const q = new URLSearchParams({ namespace: v.namespace, env: v.name, component: comp });
    objectStates.set(key, await api('/api/objects?' + q).then(r => r.json()));
  } catch (e) { objectStates.set(key, { error: String(e) }); }
  queueRender();
}

// ---- port-forwards started from the page (in the plugin, as the user) ----
let forwards = [];

async function loadForwards() {
  try { forwards = await api('/api/portforwards').then(r => r.json()); } catch (e) { /* shown as not running */ }
  queueRender();
}

function renderPorts(v, c) {
  return el('div', { class: 'ports' }, el('b', null, 'ports'), c.ports.map(p => {
    const f = forwards.find(f => f.namespace === v.namespace && f.env === v.name && f.component === c.name && f.port === p.name);
    const key = v.key + '#' + c.name + '#' + p.name;
    return el('div', { 'data-port': c.name + '/' + p.name },
      p.name + ' → ' + p.target + ' ',
      f ? [el('a', { href: f.url, target: '_blank', rel: 'noopener noreferrer', 'data-url': f.url }, f.url), ' ',
        el('button', { type: 'button', 'data-forward': 'stop', onclick: () => forwardAct(v, c.name, p.name, 'stop') }, 'Stop'),
        f.status ? el('div', { class: 'msg' }, f.status) : null]
        : el('button', { type: 'button', 'data-forward': 'start', onclick: () => forwardAct(v, c.name, p.name, 'start') }, 'Port-forward'),
      el('span', { class: 'msg', 'data-forward-result': c.name + '/' + p.name }, actionResults.get(key) || ''));
  }));
}

async function forwardAct(v, comp, port, action) {
  const key = v.key + '#' + comp + '#' + port;
  if (inFlight.has(key)) return;
  inFlight.add(key);
  actionResults.set(key, action + '…');
  queueRender();
  try {
    const r = await api('/api/portforward', { json: ({ namespace: v.namespace, env: v.name, component: comp, port, action, requestId: crypto.randomUUID() }) });
    const j = await r.json();
    actionResults.set(key, j.error ? 'refused: ' + j.error : '');
  } catch (e) { actionResults.set(key, 'failed: ' + e); }
  inFlight.delete(key);
  await loadForwards();
}

// componentButtons: up/down for an on-demand component, debug on/off for
// each image with a run step, as kubectl devloop up|down|debug do.
function componentButtons(v, c) {
  const ann = (v.object.metadata && v.object.metadata.annotations) || {};
  const buttons = [];
  if (c.onDemand) {
    const isUp = (ann['devloop.dev/up'] || '').split(',').map(x => x.trim()).includes(c.name);
    buttons.push(el('button', { type: 'button', 'data-action': isUp ? 'down' : 'up', onclick: () => componentAct(v, c.name, isUp ? 'down' : 'up', c.name) }, isUp ? 'Down' : 'Up'));
  }
  for (const im of c.images || []) {
    if (!im.run) continue;
    const target = c.name + '/' + im.name;
    const on = (ann['devloop.dev/debug'] || '').split(',').map(x => x.trim()).includes(target);
    buttons.push(el('button', { type: 'button', 'data-action': on ? 'debug-off' : 'debug-on', onclick: () => componentAct(v, target, on ? 'debug-off' : 'debug-on', c.name) }, (on ? 'Debug off ' : 'Debug on ') + im.name));
  }
  if (!buttons.length) return null;
  return el('div', { class: 'filters' }, buttons, el('span', { class: 'msg', 'data-result': c.name }, actionResults.get(v.key + '#' + c.name) || ''));
}

async function componentAct(v, target, action, comp) {
  const key = v.key + '#' + comp;
  if (inFlight.has(key)) return;
  inFlight.add(key);
  const show = text => { actionResults.set(key, text); const out = document.querySelector(`[data-result="${CSS.escape(comp)}"]`); if (out) out.textContent = text; };
  show(action + '…');
  try {
    const r = await api('/api/component', { json: ({ namespace: v.namespace, env: v.name, component: target, action, requestId: crypto.randomUUID() }) });
    const j = await r.json();
    show(j.error ? 'refused: ' + j.error : j.value);
  } catch (e) { show('failed: ' + e); }
  inFlight.delete(key);
  queueRender();
}

// ---- tests ----
// What the user typed and the last answer per suite survive the re-render
// every status update causes.
const formValues = new Map(), actionResults = new Map();

function renderTests(v) {
  const o = v.object, st = o.status || {};
  return el('div', null, (o.spec.tests || []).map(t => {
    const ts = (st.tests || []).find(x => x.name === t.name) || { runs: [] };
    const params = t.params || [];
    // Disabled while its action is in flight (a render must not enable it).
    const busy = inFlight.has(v.key + '/' + t.name);
    const form = el('form', { class: 'filters', 'data-suite': t.name, onsubmit: ev => { ev.preventDefault(); act('trigger', v, t.name, ev.currentTarget, params); } },
      params.map(p => el('label', null, p + ' ', el('input', { name: p, value: formValues.get(v.key + '/' + t.name + '/' + p) || '', oninput: e => formValues.set(v.key + '/' + t.name + '/' + p, e.target.value) }))),
      el('button', { type: 'submit', 'data-action': 'trigger', disabled: busy }, 'Trigger ' + t.name),
      el('button', { type: 'button', 'data-action': 'cancel', disabled: busy, onclick: ev => act('cancel', v, t.name, ev.currentTarget.form, []) }, 'Cancel'),
      el('span', { class: 'msg', 'data-result': '' }, actionResults.get(v.key + '/' + t.name) || ''));
    return el('section', { class: 'card', 'data-suite-card': t.name },
      el('h3', null, t.name), ts.message ? el('div', { class: 'msg' }, ts.message) : null, form,
      el('table', { 'data-runs': t.name }, el('thead', null, el('tr', null, ['#', 'Result', 'Started', 'Duration', 'Tests', 'Images', 'Logs'].map(h => el('th', { scope: 'col' }, h)))),
        el('tbody', null, (ts.runs || []).map(r => el('tr', { 'data-run': r.number },
          el('td', null, '#' + r.number), el('td', null, el('span', { class: 'p-' + (r.result || 'Pending') }, r.result || 'Pending'),
            r.exitCode !== undefined && r.exitCode !== null && r.result !== 'Passed' ? el('span', { class: 'exit' }, ' exit ' + r.exitCode) : null,
            r.message && r.message !== r.result ? el('div', { class: 'msg' }, r.message) : null,
            // The last lines status keeps of a run that did not pass: what
            // failed, without opening the log.
            r.logTail && r.result !== 'Passed' ? el('pre', { class: 'tail', 'aria-label': 'last lines of run ' + r.number }, r.logTail) : null),
          el('td', null, r.startTime ? ago(r.startTime) + ' ago' : ''),
          el('td', null, r.startTime && r.completionTime ? ((new Date(r.completionTime) - new Date(r.startTime)) / 1000).toFixed(1) + 's' : ''),
          el('td', null, r.results ? `${r.results.passed} passed, ${r.results.failed} failed, ${r.results.skipped} skipped` + (r.results.flaky && r.results.flaky.length ? ' · flaky: ' + r.results.flaky.join(', ') : '') + (r.results.failures && r.results.failures.length ? ' · failed: ' + r.results.failures.join(', ') : '') : ''),
          el('td', { class: 'mono' }, Object.entries(r.images || {}).map(([k, d]) => el('div', null, k + '@' + short(d)))),
          el('td', null, r.jobName ? el('a', { 'data-logs': r.number, href: '#/env/' + encodeURIComponent(v.namespace) + '/' + encodeURIComponent(v.name) + '/logs', onclick: () => { pendingLog = { kind: 'test', name: t.name, run: r.number }; } }, 'logs') : ''))))));
  }));
}

const inFlight = new Set();

async function act(what, v, suite, form, params) {
  const key = v.key + '/' + suite;
  // One click, one request: a second click while the first is in flight
  // does nothing (the server also answers a repeated request ID once).
  if (inFlight.has(key)) return;
  inFlight.add(key);
  const show = text => { actionResults.set(key, text); const out = document.querySelector(`[data-suite="${CSS.escape(suite)}"] [data-result]`); if (out) out.textContent = text; };
  form.querySelectorAll('button').forEach(b => { b.disabled = true; });
  const p = {};
  for (const name of params) { const val = formValues.get(key + '/' + name) || ''; if (val !== '') p[name] = val; }
  show(what + '…');
  try {
    const r = await api('/api/' + what, { json: ({ namespace: v.namespace, env: v.name, suite, params: p, requestId: crypto.randomUUID() }) });
    const j = await r.json();
    show(j.error ? 'refused: ' + j.error : what + ': ' + j.value);
  } catch (e) { show('failed: ' + e); }
  inFlight.delete(key);
  queueRender();
}

// ---- logs ----
let pendingLog = null;
const MAX_LOG_LINES = 5000;

function closeLogs() { if (logAbort) { logAbort.abort(); logAbort = null; } }

function renderLogs(v) {
  const o = v.object;
  // The combined log (every pod, build and test, as in Tilt) first.
  const opts = [{ kind: 'all', name: '', label: 'everything (builds, pods, tests)' }];
  const resources = [];
  for (const c of o.spec.components || []) {
    resources.push(['component/' + c.name, c.name + ' (pods)']);
    for (const im of c.images || []) resources.push(['build/' + c.name + '/' + im.name, 'build ' + c.name + '/' + im.name]);
  }
  for (const t of o.spec.tests || []) resources.push(['test/' + t.name, 'test ' + t.name]);
  for (const c of o.spec.components || []) {
    opts.push({ kind: 'component', name: c.name, label: 'pods of ' + c.name });
    for (const im of c.images || []) opts.push({ kind: 'build', name: c.name + '/' + im.name, label: 'build of ' + c.name + '/' + im.name });
  }
  for (const t of o.spec.tests || []) opts.push({ kind: 'test', name: t.name, label: 'test ' + t.name + ' (latest run)' });
  const sel = el('select', { 'aria-label': 'log', id: 'logtarget' }, opts.map((x, i) => el('option', { value: i }, x.label)));
  // Which resource's lines the combined log shows; the route's selected
  // component preselects it.
  const sel0 = route().sel;
  const resource = el('select', { 'aria-label': 'resource', id: 'logresource' }, el('option', { value: '' }, 'all resources'),
    resources.map(([id, label]) => el('option', { value: id, selected: !!sel0 && (id === 'component/' + sel0 || id === 'test/' + sel0) }, label)));
  const level = el('select', { 'aria-label': 'level', id: 'loglevel' }, ['all', 'error', 'warn', 'info', 'debug'].map(l => el('option', { value: l }, l)));
  const text = el('input', { 'aria-label': 'text or /regex/', placeholder: 'text or /regex/', id: 'logtext' });
  const follow = el('input', { type: 'checkbox', checked: true, id: 'logfollow' });
  const container = el('input', { 'aria-label': 'container (pods only)', placeholder: 'container', id: 'logcontainer', size: 12 });
  const view = el('div', { class: 'log', id: 'logview', 'data-env': v.key, tabindex: 0, 'aria-label': 'log lines' });
  const status = el('span', { class: 'muted', id: 'logstatus' });
  const refilter = () => { for (const line of view.children) line.hidden = !lineMatches(line); };
  level.addEventListener('change', refilter); text.addEventListener('input', refilter); resource.addEventListener('change', refilter);
  let run = 0;
  const open = () => {
    closeLogs(); view.replaceChildren();
    const t = opts[sel.value]; if (!t) return;
    resource.hidden = t.kind !== 'all';
    const q = new URLSearchParams({ namespace: v.namespace, env: v.name, kind: t.kind, name: t.name, follow: t.kind === 'all' || follow.checked ? '1' : '0' });
    if (t.kind === 'test' && run) q.set('run', run);
    if (t.kind === 'component' && container.value) q.set('container', container.value);
    // A history row's link opens its run, and says so.
    status.textContent = 'streaming ' + (t.kind === 'test' && run ? 'test ' + t.name + ' run #' + run : t.label);
    const abort = logAbort = new AbortController();
    streamEvents('/api/logs?' + q, {
      lines: d => appendLines(view, t.kind, JSON.parse(d)),
      dropped: d => appendLines(view, t.kind, [{ text: '… ' + d + ' lines dropped (the page fell behind)' }]),
      end: d => { const e = JSON.parse(d); status.textContent = e.error ? 'ended: ' + e.error : 'ended'; closeLogs(); },
    }, abort.signal).catch(e => { if (!abort.signal.aborted) { status.textContent = 'disconnected: ' + e.message; closeLogs(); } });
  };
  if (pendingLog) { const i = opts.findIndex(x => x.kind === pendingLog.kind && x.name === pendingLog.name); if (i >= 0) sel.value = i; run = pendingLog.run || 0; pendingLog = null; }
  sel.addEventListener('change', () => { run = 0; open(); });
  follow.addEventListener('change', open);
  container.addEventListener('change', open);
  setTimeout(open, 0);
  return el('section', null, el('div', { class: 'filters' }, sel, resource, container, level, text, el('label', null, follow, ' follow'), status), view);
}

function levelOf(text, obj) {
  const l = obj && (obj.level || obj.lvl || obj.severity);
  const s = (l ? String(l) : (text.match(/\b(error|err|fatal|panic|warn|warning|info|debug|trace)\b/i) || [])[1] || '').toLowerCase();
  if (/^(error|err|fatal|panic)/.test(s)) return 'error';
  if (/^warn/.test(s)) return 'warn';
  if (/^(debug|trace)/.test(s)) return 'debug';
  return s ? 'info' : '';
}

// readable shows a JSON line as "msg key=value …".
function readable(text) {
  if (!text.startsWith('{')) return [text, null];
  try {
    const o = JSON.parse(text);
    const msg = o.msg || o.message || '';
    const rest = Object.entries(o).filter(([k]) => !['msg', 'message', 'level', 'lvl', 'time', 'ts'].includes(k)).map(([k, val]) => k + '=' + (typeof val === 'string' ? val : JSON.stringify(val)));
    return [[msg, ...rest].join(' '), o];
  } catch (e) { return [text, null]; }
}

function appendLines(view, source, lines) {
  const stick = view.scrollTop + view.clientHeight >= view.scrollHeight - 4;
  for (const l of lines) {
    const [text, obj] = readable(l.text);
    const lvl = levelOf(l.text, obj);
    const d = el('div', { class: 'line' + (lvl ? ' l-' + lvl : ''), 'data-level': lvl, 'data-source': source, 'data-time': l.time, 'data-resource': l.resource },
      l.time ? el('span', { class: 'ts' }, new Date(l.time).toISOString().slice(11, 23) + ' ') : null,
      l.resource ? el('span', { class: 'res' }, l.resource.replace(/^component\//, '') + ' ') : null,
      l.stream ? el('span', { class: 'st' }, '[' + l.stream + '] ') : null, text);
    d.hidden = !lineMatches(d);
    view.append(d);
  }
  while (view.childElementCount > MAX_LOG_LINES) view.firstElementChild.remove();
  if (stick) view.scrollTop = view.scrollHeight;
}

function lineMatches(line) {
  const lvl = document.getElementById('loglevel'), txt = document.getElementById('logtext'), res = document.getElementById('logresource');
  if (res && !res.hidden && res.value && line.dataset.resource !== res.value) return false;
  if (lvl && lvl.value !== 'all' && line.dataset.level !== lvl.value) return false;
  const q = txt ? txt.value : '';
  if (!q) return true;
  if (q.length > 2 && q.startsWith('/') && q.endsWith('/')) {
    try { return new RegExp(q.slice(1, -1)).test(line.textContent); } catch (e) { return true; }
  }
  return line.textContent.includes(q);
}

// ---- timeline ----
// Every change's steps are drawn on one axis, seconds since that change
// started, so bars of different changes compare at a glance; a step still
// running is drawn up to now and grows with the page's each-second render.
const BAR_W = 420;

function stepSpan(c, s, now) {
  const off = (new Date(s.start) - new Date(c.started)) / 1000;
  const running = !s.duration && c.result === 'InFlight';
  const dur = s.duration ? s.duration / 1e9 : running ? Math.max(0, (now - new Date(s.start)) / 1000) : 0;
  return { off, dur, running };
}

// tickStep is a round step giving at most n ticks over secs.
function tickStep(secs, n = 8) {
  for (const t of [0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600]) if (secs / t <= n) return t;
  return 7200;
}
const secsLabel = t => t >= 60 && t % 60 === 0 ? t / 60 + 'm' : t + 's';

function axisSvg(maxSecs, scale, name) {
  const step = tickStep(maxSecs), ticks = [];
  for (let t = 0; t <= maxSecs + 1e-9; t += step) ticks.push(t);
  return svg('svg', { width: BAR_W, height: 20, class: 'axis', 'data-axis': name, 'aria-label': 'seconds since the change started' },
    svg('line', { x1: 0, y1: 19, x2: BAR_W, y2: 19 }),
    ticks.flatMap(t => { const x = Math.min(BAR_W - 1, t * scale); return [svg('line', { x1: x, y1: 13, x2: x, y2: 19 }), svg('text', { x: Math.min(x + 2, BAR_W - 24), y: 10 }, secsLabel(t))]; }));
}

function renderTimeline(v) {
  const changes = state.timelines.get(v.key) || [];
  if (!changes.length) return el('p', { class: 'muted' }, 'No change recorded yet (the operator writes the timeline ConfigMap devloop-changes-' + v.name + ').');
  const now = Date.now();
  const maxSecs = Math.max(1, ...changes.flatMap(c => (c.steps || []).map(s => { const p = stepSpan(c, s, now); return p.off + p.dur; })));
  const scale = BAR_W / maxSecs;
  return el('section', null, historyChart(changes),
    // In a borderless card: the axis lines up with the cards' bars.
    el('div', { class: 'card bare' }, el('div', { class: 'steps' }, el('span'), el('span'), axisSvg(maxSecs, scale, 'steps'), el('span', { class: 'muted' }, 'since start'))),
    changes.map(c => el('div', { class: 'card', 'data-change': c.revision },
      el('h3', null, c.source + ' ', el('code', null, short(String(c.revision).split('@').pop())), ' ', el('span', { class: 'p-' + c.result }, c.result),
        c.serving ? ' · serving in ' + ((new Date(c.serving) - new Date(c.started)) / 1000).toFixed(1) + 's' : ''),
      el('div', { class: 'steps' }, (c.steps || []).flatMap(s => {
        const p = stepSpan(c, s, now);
        return [el('span', null, s.name), el('span', { class: 'muted', title: s.component || null }, s.component || ''), barSvg(p, scale),
          el('span', null, p.running ? 'running ' + p.dur.toFixed(0) + 's' : p.dur ? p.dur.toFixed(2) + 's' : 'unfinished')];
      })))));
}

function barSvg(p, scale) {
  const x = Math.min(p.off * scale, BAR_W - 2), w = Math.max(2, Math.min(p.dur * scale, BAR_W - x));
  return svg('svg', { width: BAR_W, height: 12, 'data-bar': '', 'data-secs': p.dur.toFixed(1), 'data-running': p.running ? 'true' : null },
    svg('rect', { x, y: 0, width: w, height: 12, class: p.running ? 'running' : null }));
}

// historyChart: change to serving per change, oldest to newest, with a
// seconds axis.
function historyChart(changes) {
  const serving = changes.filter(c => c.serving).map(c => ({ c, secs: (new Date(c.serving) - new Date(c.started)) / 1000 })).reverse();
  if (!serving.length) return null;
  const mx = Math.max(...serving.map(x => x.secs)), step = tickStep(mx, 4), top = Math.ceil(mx / step) * step, L = 40, H = 90;
  const ticks = [];
  for (let t = 0; t <= top + 1e-9; t += step) ticks.push(t);
  return el('div', null, el('h3', null, 'Change to serving, oldest → newest'),
    svg('svg', { width: L + 10 + serving.length * 24, height: H + 20, class: 'axis', role: 'img', 'aria-label': 'change to serving over history' },
      svg('g', { 'data-axis': 'history' }, ticks.flatMap(t => { const y = 10 + H - H * t / top; return [svg('line', { x1: L - 4, y1: y, x2: L + serving.length * 24, y2: y, class: 'grid' }), svg('text', { x: 0, y: y + 4 }, secsLabel(t))]; })),
      serving.map((s, i) => { const h = Math.max(2, H * s.secs / top); return svg('rect', { x: L + 4 + i * 24, y: 10 + H - h, width: 18, height: h, fill: '#0969da' }, svg('title', null, s.c.revision + ': ' + s.secs.toFixed(1) + 's')); })));
}

function renderEvents(v) {
  const evs = state.events.get(v.key) || [];
  if (!evs.length) return el('p', { class: 'muted' }, 'No events.');
  return el('table', null, el('thead', null, el('tr', null, ['When', 'Type', 'Reason', 'Message', 'Count'].map(h => el('th', { scope: 'col' }, h)))),
    el('tbody', null, evs.map(e => el('tr', null, el('td', null, ago(e.last) + ' ago'), el('td', { class: e.type === 'Warning' ? 's-Stalled' : '' }, e.type), el('td', null, e.reason), el('td', { class: 'msg' }, e.message), el('td', null, e.count)))));
}

start();
