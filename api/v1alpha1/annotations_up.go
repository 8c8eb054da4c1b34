package v1alpha1

import (
	"slices"
	"strings"
)

// UpAnnotation lists the on-demand components brought up, comma-separated
// ("kwok,monitoring"). `kubectl devloop up` and `down` write it, so does
// the operator when a triggered test suite needs an on-demand component;
// GitOps may set it too. It lives on the DevEnvironment so it survives
// operator restarts.
const UpAnnotation = "devloop.dev/up"

// ReasonBroughtUp is the event of the operator adding on-demand
// components to UpAnnotation for a queued test run.
const ReasonBroughtUp = "BroughtUp"

// UpComponents are the names UpAnnotation lists, sorted, without
// duplicates or empty entries.
func (e *DevEnvironment) UpComponents() []string {
	return ParseUpList(e.Annotations[UpAnnotation])
}

// ParseUpList splits an UpAnnotation value into sorted, distinct names.
func ParseUpList(v string) []string {
	var out []string
	for _, n := range strings.Split(v, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// FormatUpList is the UpAnnotation value for names.
func FormatUpList(names []string) string {
	return strings.Join(ParseUpList(strings.Join(names, ",")), ",")
}

// IsEnabled says whether the component is on: not enabled: false, and,
// if on demand, listed in up.
func (c *Component) IsEnabled(up []string) bool {
	if c.Enabled != nil && !*c.Enabled {
		return false
	}
	return !c.OnDemand || slices.Contains(up, c.Name)
}
