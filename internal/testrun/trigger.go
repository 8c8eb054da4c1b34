// Package testrun runs test suites as Jobs, end to end: the trigger
// annotation's grammar and protocol (the one copy the kubectl plugin also
// uses), the run state machine (Engine), the Job of a run (its name and
// spec), reading a finished Job's outcome and log tail, and the bounded
// history of runs kept in status.
package testrun

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// Trigger is a parsed trigger annotation value:
//
//	unit-tests                 start one suite
//	unit-tests,e2e             start several
//	all                        start every suite
//	label:e2e                  start every suite labelled e2e
//	cancel:unit-tests          cancel a suite's running and queued runs
//	cancel:all, cancel:label:e2e, cancel:a,b
//	unit-tests@<token>         any of the above, handled once per token
//	e2e(E2E_FOCUS=Job;K=V)     start with env vars set (tests[].params)
//
// A value either starts or cancels: "a,cancel:b" is refused rather than
// guessed at.
type Trigger struct {
	// Value is the annotation value as written.
	Value string
	// Token, when not empty, makes this a token trigger: left in place
	// and handled once per token.
	Token string
	// Cancel ends the selected suites' runs instead of starting them.
	Cancel bool
	// Selectors pick suites, in the order written.
	Selectors []Selector
}

// Selector picks suites: every suite, those with a label, or one by name.
type Selector struct {
	All   bool
	Label string
	Name  string
	// Params are the env vars a start selector sets for its runs
	// (params.go), sorted by name.
	Params []v1alpha1.EnvVar
}

func (s Selector) String() string {
	switch {
	case s.All:
		return "all"
	case s.Label != "":
		return "label:" + s.Label
	}
	return s.Name
}

// dnsLabel is the shape of suite names and labels (the CRD's pattern).
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// MaxValue bounds a trigger value: it is echoed in status.
const MaxValue = 1024

// Parse reads a trigger annotation value. Errors say what is wrong and
// show the accepted forms.
func Parse(value string) (Trigger, error) {
	t := Trigger{Value: value}
	v := strings.TrimSpace(value)
	if len(value) > MaxValue {
		return t, fmt.Errorf("trigger value is %d bytes; at most %d", len(value), MaxValue)
	}
	if i := strings.LastIndexByte(v, '@'); i >= 0 {
		t.Token = strings.TrimSpace(v[i+1:])
		v = strings.TrimSpace(v[:i])
		if t.Token == "" {
			return t, fmt.Errorf("trigger %q: empty token after @ (want <suites>@<token>)", value)
		}
	}
	if v == "" {
		return t, fmt.Errorf("trigger %q names no suite (want a suite name, a comma list, all, label:<label>, or cancel:<suite>)", value)
	}
	starts, cancels := 0, 0
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if rest, ok := strings.CutPrefix(item, "cancel:"); ok {
			cancels++
			item = strings.TrimSpace(rest)
		} else if cancels == 0 || starts > 0 {
			// "cancel:a,b" cancels both: the prefix carries over to the
			// items after it.
			starts++
		}
		item, params, err := splitParams(item)
		if err != nil {
			return t, fmt.Errorf("trigger %q: %w", value, err)
		}
		sel, err := parseSelector(strings.TrimSpace(item))
		if err != nil {
			return t, fmt.Errorf("trigger %q: %w", value, err)
		}
		sel.Params = params
		t.Selectors = append(t.Selectors, sel)
	}
	if starts > 0 && cancels > 0 {
		return t, fmt.Errorf("trigger %q both starts and cancels suites; use one trigger for each", value)
	}
	t.Cancel = cancels > 0
	if t.Cancel && slices.ContainsFunc(t.Selectors, func(s Selector) bool { return len(s.Params) > 0 }) {
		return t, fmt.Errorf("trigger %q: a cancel takes no parameters", value)
	}
	return t, nil
}

func parseSelector(item string) (Selector, error) {
	switch {
	case item == "":
		return Selector{}, fmt.Errorf("an empty name in the list")
	case item == "all":
		return Selector{All: true}, nil
	case strings.HasPrefix(item, "label:"):
		l := strings.TrimSpace(strings.TrimPrefix(item, "label:"))
		if !dnsLabel.MatchString(l) || len(l) > 63 {
			return Selector{}, fmt.Errorf("label %q is not a valid label (lower-case letters, digits and -)", l)
		}
		return Selector{Label: l}, nil
	case !dnsLabel.MatchString(item) || len(item) > 63:
		return Selector{}, fmt.Errorf("%q is not a suite name (lower-case letters, digits and -; or all, label:<label>, cancel:<suite>)", item)
	}
	return Selector{Name: item}, nil
}

// UnknownError is a trigger naming suites or labels the spec does not
// have. Its message lists what the spec does have.
type UnknownError struct {
	Trigger string
	Names   []string
	Labels  []string
	Valid   []string
	// ValidLabels are the labels the suites carry.
	ValidLabels []string
}

func (e *UnknownError) Error() string {
	var parts []string
	if len(e.Names) > 0 {
		parts = append(parts, fmt.Sprintf("no test suite named %s", quoteList(e.Names)))
	}
	if len(e.Labels) > 0 {
		parts = append(parts, fmt.Sprintf("no test suite labelled %s", quoteList(e.Labels)))
	}
	msg := fmt.Sprintf("trigger %q: %s; nothing was started or cancelled. Suites: %s", e.Trigger, strings.Join(parts, ", "), listOrNone(e.Valid))
	if len(e.Labels) > 0 {
		msg += "; labels: " + listOrNone(e.ValidLabels)
	}
	return msg
}

func quoteList(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	return strings.Join(s, ", ")
}

// Resolve names the suites a trigger selects, in spec order, each once.
// A name or label the spec lacks fails the whole trigger (*UnknownError):
// running part of what was asked for would hide the typo.
func (t Trigger) Resolve(suites []v1alpha1.TestSuite) ([]string, error) {
	selected := map[string]bool{}
	unknown := &UnknownError{Trigger: t.Value}
	for _, sel := range t.Selectors {
		found := false
		for _, s := range suites {
			if sel.All || s.Name == sel.Name || (sel.Label != "" && slices.Contains(s.Labels, sel.Label)) {
				selected[s.Name], found = true, true
			}
		}
		switch {
		case found || (sel.All && len(suites) > 0):
		case sel.All:
			unknown.Names = append(unknown.Names, "all")
		case sel.Label != "":
			unknown.Labels = append(unknown.Labels, sel.Label)
		default:
			unknown.Names = append(unknown.Names, sel.Name)
		}
	}
	if len(unknown.Names) > 0 || len(unknown.Labels) > 0 {
		labels := map[string]bool{}
		for _, s := range suites {
			unknown.Valid = append(unknown.Valid, s.Name)
			for _, l := range s.Labels {
				labels[l] = true
			}
		}
		for l := range labels {
			unknown.ValidLabels = append(unknown.ValidLabels, l)
		}
		sort.Strings(unknown.ValidLabels)
		return nil, unknown
	}
	var out []string
	for _, s := range suites {
		if selected[s.Name] {
			out = append(out, s.Name)
		}
	}
	return out, nil
}
