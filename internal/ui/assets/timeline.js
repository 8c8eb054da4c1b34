// The devloop dashboard: the timeline and events tabs (app.js holds the core; it loads last
// and starts the page). Values from the cluster are set as text, never
// parsed as HTML.
'use strict';

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
