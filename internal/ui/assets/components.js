// The devloop dashboard: the components tab (app.js holds the core; it loads last
// and starts the page). Values from the cluster are set as text, never
// parsed as HTML.
'use strict';

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
