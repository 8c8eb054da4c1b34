// The devloop dashboard: the dependency graph (app.js holds the core; it loads last
// and starts the page). Values from the cluster are set as text, never
// parsed as HTML.
'use strict';

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
