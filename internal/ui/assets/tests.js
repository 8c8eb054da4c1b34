// The devloop dashboard: the tests tab (app.js holds the core; it loads last
// and starts the page). Values from the cluster are set as text, never
// parsed as HTML.
'use strict';

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
