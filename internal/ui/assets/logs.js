// The devloop dashboard: the logs tab (app.js holds the core; it loads last
// and starts the page). Values from the cluster are set as text, never
// parsed as HTML.
'use strict';

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
