// The devloop dashboard: what needs attention and the resource list (app.js holds the core; it loads last
// and starts the page). Values from the cluster are set as text, never
// parsed as HTML.
'use strict';

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
// push does after a push: the images are built again if their inputs
// changed, and an image whose inputs did not is neither built nor pushed
// (builds are content-addressed). One click, one request; the answer
// then follows status (rebuildOutcome): waiting for the operator,
// building, built (the images whose build changed), build failed, not
// built, or nothing changed since the last build.
function rebuildButton(v, target, label) {
  const key = v.key + '#rebuild#' + target;
  const asked = rebuilds.get(key);
  if (asked) actionResults.set(key, rebuildOutcome(v, target, key, asked));
  return el('button', { type: 'button', class: 'small', 'data-rebuild': target, disabled: inFlight.has(key), title: 'request a reconcile (as kubectl devloop push does)',
    onclick: () => rebuild(v, target, key) }, label, el('span', { class: 'msg', 'data-rebuild-result': target }, actionResults.get(key) ? ' ' + actionResults.get(key) : ''));
}

// rebuilds are the page's reconcile requests still followed: the
// request's value and what status said of the target's images at the
// click.
const rebuilds = new Map();

// imagesOf is what status says of target's images (COMPONENT or
// COMPONENT/IMAGE); buildsOf keeps, per image, its digest and last build.
function imagesOf(v, target) {
  const image = target.split('/')[1];
  return (componentOf(v, target).images || []).filter(im => !image || im.name === image);
}
const componentOf = (v, target) => ((v.object.status || {}).components || []).find(c => c.name === target.split('/')[0]) || {};
const buildOf = im => JSON.stringify([im.digest, im.build && [im.build.job, im.build.startTime, im.build.result]]);
const buildsOf = images => Object.fromEntries(images.map(im => [im.name, buildOf(im)]));

// rebuildOutcome reads status once the operator handled the request
// (status.lastHandledReconcileAt is the request's value, or a later
// one): the reconcile that handled it built what changed, so images
// whose digest and last build are as at the click were not built.
function rebuildOutcome(v, target, key, asked) {
  const handled = (v.object.status || {}).lastHandledReconcileAt || '';
  if (handled !== asked.token && !(Date.parse(handled) > Date.parse(asked.token))) return 'requested; waiting for the operator';
  const cs = componentOf(v, target), images = imagesOf(v, target), phase = cs.phase;
  // A build the reconcile started may show first as the phase.
  if (phase === 'Building' || images.some(im => im.build && im.build.result === 'Running')) return 'building…';
  if (phase === 'Blocked' || phase === 'Pending') return 'waiting: ' + target.split('/')[0] + ' is ' + phase;
  rebuilds.delete(key);
  const changed = images.filter(im => asked.before[im.name] !== buildOf(im));
  if (!changed.length) {
    // Not built: either nothing to build, or the reconcile failed first.
    if (phase === 'Failed') return 'not built: ' + (cs.message || target.split('/')[0] + ' Failed');
    return 'nothing changed since the last build: nothing built or pushed';
  }
  const failed = changed.filter(im => im.build && im.build.result === 'Failed');
  if (failed.length) return 'build failed: ' + failed.map(im => im.name).join(', ') + ' (see its build log)';
  return 'built ' + changed.map(im => im.name + '@' + short(im.digest)).join(', ');
}

async function rebuild(v, target, key) {
  if (inFlight.has(key)) return;
  inFlight.add(key);
  rebuilds.delete(key);
  actionResults.set(key, '…');
  const before = buildsOf(imagesOf(v, target));
  queueRender();
  try {
    const r = await api('/api/component', { json: ({ namespace: v.namespace, env: v.name, component: target, action: 'rebuild', requestId: crypto.randomUUID() }) });
    const j = await r.json();
    if (j.error) actionResults.set(key, 'refused: ' + j.error);
    else { actionResults.set(key, 'requested'); rebuilds.set(key, { token: j.value, before }); }
  } catch (e) { actionResults.set(key, 'failed: ' + e); }
  inFlight.delete(key);
  queueRender();
}
