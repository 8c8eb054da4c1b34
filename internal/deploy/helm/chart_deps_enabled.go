package helm

import (
	"fmt"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
)

// offDependencies says which dependencies of the top chart the release's
// values turn off, decided as Helm's install decides (chartutil's
// processDependencyTags, then processDependencyConditions): tags first
// (off when every tag it names is set and false), then the first path of
// its condition that holds a bool. Only the top chart's dependencies are
// decided: a subchart's conditions read values under the subchart's own
// key, which Helm coalesces with subcharts that are not there yet.
type offDependencies struct {
	vals chartutil.Values
	// err is why the values could not be read: every dependency is then
	// fetched, and the error is told when a fetch fails.
	err error
}

// offDependencies reads the values, once per load and only when a
// dependency of the top chart is missing; the zero value (no Values
// function) turns nothing off.
func (r *depResolver) offDependencies(ch *chart.Chart) offDependencies {
	if r.opts.Values == nil || !anyOptional(ch.Metadata.Dependencies) {
		return offDependencies{}
	}
	user, err := r.opts.Values(ch)
	if err != nil {
		return offDependencies{err: err}
	}
	vals, err := chartutil.CoalesceValues(ch, user)
	if err != nil {
		return offDependencies{err: err}
	}
	return offDependencies{vals: vals}
}

func anyOptional(reqs []*chart.Dependency) bool {
	for _, req := range reqs {
		if req != nil && (strings.TrimSpace(req.Condition) != "" || len(req.Tags) > 0) {
			return true
		}
	}
	return false
}

// turnedOff says whether the values turn req off.
func (o offDependencies) turnedOff(req *chart.Dependency) bool {
	if o.vals == nil {
		return false
	}
	enabled := true
	if tags, err := o.vals.Table("tags"); err == nil {
		var on, off bool
		for _, k := range req.Tags {
			if b, ok := tags[k].(bool); ok {
				on, off = on || b, off || !b
			}
		}
		enabled = on || !off
	}
	if b, ok := o.condition(req); ok {
		enabled = b
	}
	return !enabled
}

// condition is the first path of req's condition that holds a bool.
func (o offDependencies) condition(req *chart.Dependency) (value, found bool) {
	for _, c := range strings.Split(strings.TrimSpace(req.Condition), ",") {
		if c = strings.TrimSpace(c); c == "" {
			continue
		}
		if v, err := o.vals.PathValue(c); err == nil {
			if b, ok := v.(bool); ok {
				return b, true
			}
		}
	}
	return false, false
}

// hint ends the error of a dependency that could not be fetched with how
// to leave it out, when it can be: an umbrella chart's optional subchart
// from a repository this cluster cannot reach.
func (o offDependencies) hint(req *chart.Dependency) string {
	cond := strings.TrimSpace(strings.Split(req.Condition, ",")[0])
	switch {
	case o.err != nil:
		return fmt.Sprintf(" (reading the values to see whether it is turned off: %v)", o.err)
	case cond != "":
		return fmt.Sprintf("; set %s: false in the values to install without it", cond)
	case len(req.Tags) > 0:
		return fmt.Sprintf("; set tags.%s: false in the values to install without it", req.Tags[0])
	}
	return ""
}
