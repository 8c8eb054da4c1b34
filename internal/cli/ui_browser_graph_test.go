package cli

import (
	"testing"

	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/test/browser"
)

// The graph draws an edge that skips a column (web reads source app, two
// columns left, with crds between) around the nodes between, never
// behind one; every edge has an arrowhead; and a plain node (crds: no
// image, no port) is clickable and selects its component in the resource
// list beside the detail.
func TestUIGraphEdgesSkipColumnsWithArrowsAndPlainNodesSelect(t *testing.T) {
	bctx := browser.Start(t)
	ns := testenv.Namespace(t, k8s, "ui-graph")
	createEnv(t, ns, "team", teamSpec())
	base, url := launchDashboard(t, testOptions(), "-n", ns)
	browser.Navigate(t, bctx, url)
	browser.WaitJS(t, bctx, "the list", `document.querySelector('tr[data-env]')`)
	browser.Navigate(t, bctx, base+"/#/env/"+ns+"/team/graph")
	browser.WaitJS(t, bctx, "the graph", `document.querySelector('[data-node="component/web"]') && document.querySelector('[data-node="component/crds"]')`)

	// Sample each edge every 2 px: no point may fall inside a node that
	// is not one of its two ends.
	crossing := browser.EvalString(t, bctx, `(() => {
	  const boxes = [...document.querySelectorAll('[data-node]')].map(g => {
	    const m = /translate\(([-\d.]+),\s*([-\d.]+)\)/.exec(g.getAttribute('transform')), r = g.querySelector('rect');
	    return { id: g.dataset.node, x: +m[1], y: +m[2], w: r.width.baseVal.value, h: r.height.baseVal.value };
	  });
	  const edges = [...document.querySelectorAll('svg.graph path')].filter(p => p.closest('marker') === null);
	  if (edges.length === 0) return 'no edges drawn';
	  const bad = [];
	  for (const p of edges) {
	    const key = p.querySelector('title').textContent;
	    const ends = key.split(' depends on ').map(s => s.replace(/ \(implicit\)$/, ''));
	    for (let l = 0, n = p.getTotalLength(); l <= n; l += 2) {
	      const pt = p.getPointAtLength(l);
	      for (const b of boxes) if (!ends.includes(b.id) && pt.x > b.x + 1 && pt.x < b.x + b.w - 1 && pt.y > b.y + 1 && pt.y < b.y + b.h - 1) bad.push(key + ' crosses ' + b.id);
	    }
	  }
	  return [...new Set(bad)].join('; ');
	})()`)
	if crossing != "" {
		t.Errorf("edges drawn behind nodes: %s", crossing)
	}
	if skip := browser.EvalString(t, bctx, `String([...document.querySelectorAll('svg.graph path title')].some(t => t.textContent === 'component/web depends on source/app'))`); skip != "true" {
		t.Errorf("no edge from source app to component web (it skips a column)")
	}
	if noArrow := browser.EvalString(t, bctx, `[...document.querySelectorAll('svg.graph path')].filter(p => p.closest('marker') === null).filter(p => { const m = p.getAttribute('marker-end'); return !m || !document.querySelector(m.replace(/^url\((.*)\)$/, '$1') + ' path'); }).map(p => p.querySelector('title').textContent).join('; ')`); noArrow != "" {
		t.Errorf("edges without an arrowhead: %s", noArrow)
	}

	// A plain node selects its component.
	browser.WaitJS(t, bctx, "a click on the crds node", `(() => { const g = document.querySelector('[data-node="component/crds"]'); if (g) g.dispatchEvent(new MouseEvent('click', { bubbles: true })); return !!g })()`)
	browser.WaitJS(t, bctx, "crds selected: its card and its entry in the resource list", `location.hash.endsWith('/components/crds') && document.querySelector('[data-component="crds"].selected') && document.querySelector('#resources [data-resource="component/crds"] a[aria-current]')`)
}
