package testrun

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// Trigger-time parameters. A start selector may carry env vars in
// parentheses, values query-escaped:
//
//	e2e-focused(E2E_FOCUS=Job;E2E_SKIP=Flaky)
//	e2e(E2E_FOCUS=Job%7CPod%2Cfast)@pr-42
//
// Parentheses appear in no other form (names and labels are DNS labels),
// so a parameter list cannot be read as a comma list, a label, a cancel or
// a token. ',', ';', ')', '@', '%' and '+' in a value must be escaped
// (FormatSelector does it; '+' reads as a space, as in a query).

// envName is the shape of an env var name (the CRD's rule).
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// maxParamValue is the CRD's bound on an env value.
const maxParamValue = 320

// splitParams cuts "name(K=V;...)" into "name" and its parsed params.
func splitParams(item string) (string, []v1alpha1.EnvVar, error) {
	open := strings.IndexByte(item, '(')
	if open < 0 {
		if strings.IndexByte(item, ')') >= 0 {
			return "", nil, fmt.Errorf("%q has ')' without '('", item)
		}
		return item, nil, nil
	}
	if !strings.HasSuffix(item, ")") {
		return "", nil, fmt.Errorf("%q: parameters go in parentheses at the end, e.g. suite(NAME=value;OTHER=value)", item)
	}
	name, list := strings.TrimSpace(item[:open]), item[open+1:len(item)-1]
	var params []v1alpha1.EnvVar
	for _, kv := range strings.Split(list, ";") {
		kv = strings.TrimSpace(kv)
		k, raw, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || !envName.MatchString(k) || len(k) > 63 {
			return "", nil, fmt.Errorf("%q: parameter %q is not NAME=value with NAME an environment variable name", item, kv)
		}
		v, err := url.QueryUnescape(raw)
		if err != nil {
			return "", nil, fmt.Errorf("%q: parameter %s: value %q is not query-escaped: %w", item, k, raw, err)
		}
		if len(v) > maxParamValue {
			return "", nil, fmt.Errorf("%q: parameter %s is %d bytes; at most %d", item, k, len(v), maxParamValue)
		}
		if slices.ContainsFunc(params, func(e v1alpha1.EnvVar) bool { return e.Name == k }) {
			return "", nil, fmt.Errorf("%q sets %s twice", item, k)
		}
		params = append(params, v1alpha1.EnvVar{Name: k, Value: v})
	}
	sort.Slice(params, func(i, j int) bool { return params[i].Name < params[j].Name })
	return name, params, nil
}

// FormatSelector is word (a suite name, all, label:<l>) with params in the
// annotation's parameter form, values escaped.
func FormatSelector(word string, params []v1alpha1.EnvVar) string {
	if len(params) == 0 {
		return word
	}
	kv := make([]string, len(params))
	for i, p := range params {
		kv[i] = p.Name + "=" + url.QueryEscape(p.Value)
	}
	return word + "(" + strings.Join(kv, ";") + ")"
}

// ParseParamFlags reads `--env K=V` flags into params, sorted by name.
func ParseParamFlags(flags []string) ([]v1alpha1.EnvVar, error) {
	var params []v1alpha1.EnvVar
	for _, f := range flags {
		k, v, ok := strings.Cut(f, "=")
		if !ok || !envName.MatchString(k) || len(k) > 63 {
			return nil, fmt.Errorf("--env %q: want NAME=value with NAME an environment variable name", f)
		}
		if len(v) > maxParamValue {
			return nil, fmt.Errorf("--env %s: value is %d bytes; at most %d", k, len(v), maxParamValue)
		}
		if slices.ContainsFunc(params, func(e v1alpha1.EnvVar) bool { return e.Name == k }) {
			return nil, fmt.Errorf("--env %s is given twice", k)
		}
		params = append(params, v1alpha1.EnvVar{Name: k, Value: v})
	}
	sort.Slice(params, func(i, j int) bool { return params[i].Name < params[j].Name })
	return params, nil
}

// Request is one run a start trigger asks for: a suite and its params.
type Request struct {
	Suite  string
	Params []v1alpha1.EnvVar
}

// ParamError is a trigger setting variables a suite does not accept.
type ParamError struct {
	Trigger  string
	Suite    string
	Names    []string
	Accepted []string
}

func (e *ParamError) Error() string {
	accepted := "none: the suite lists no tests[].params"
	if len(e.Accepted) > 0 {
		accepted = strings.Join(e.Accepted, ", ")
	}
	return fmt.Sprintf("trigger %q: suite %s does not accept %s; nothing was started. Accepted params: %s",
		e.Trigger, e.Suite, strings.Join(e.Names, ", "), accepted)
}

// Requests are the runs a start trigger asks for, in spec order: each
// selected suite with the params of the selector that picked it. Unknown
// suites fail as in Resolve; a param a suite does not list fails the whole
// trigger (*ParamError), as does one suite picked twice with different
// params.
func (t Trigger) Requests(suites []v1alpha1.TestSuite) ([]Request, error) {
	names, err := t.Resolve(suites)
	if err != nil {
		return nil, err
	}
	chosen := map[string][]v1alpha1.EnvVar{}
	for _, sel := range t.Selectors {
		for _, s := range suites {
			if !(sel.All || s.Name == sel.Name || (sel.Label != "" && slices.Contains(s.Labels, sel.Label))) {
				continue
			}
			var bad []string
			for _, p := range sel.Params {
				if !slices.Contains(s.Params, p.Name) {
					bad = append(bad, p.Name)
				}
			}
			if len(bad) > 0 {
				return nil, &ParamError{Trigger: t.Value, Suite: s.Name, Names: bad, Accepted: s.Params}
			}
			if prev, ok := chosen[s.Name]; ok && !SameParams(prev, sel.Params) {
				return nil, fmt.Errorf("trigger %q selects suite %s twice with different params; use one trigger per parameter set", t.Value, s.Name)
			}
			chosen[s.Name] = sel.Params
		}
	}
	out := make([]Request, 0, len(names))
	for _, n := range names {
		out = append(out, Request{Suite: n, Params: chosen[n]})
	}
	return out, nil
}

// SameParams reports whether two param lists (sorted by name) are equal;
// a queued run joins only requests with the same params.
func SameParams(a, b []v1alpha1.EnvVar) bool {
	return slices.Equal(a, b)
}

// withParams sets a run's params on the test container's env, after the
// suite's own entries so they win (a container's later entries do).
func withParams(job *batchv1.Job, params []v1alpha1.EnvVar) {
	if len(params) == 0 {
		return
	}
	spec := &job.Spec.Template.Spec
	for i := range spec.Containers {
		c := &spec.Containers[i]
		if c.Name != ContainerTest {
			continue
		}
		for _, p := range params {
			c.Env = append(c.Env, corev1.EnvVar{Name: p.Name, Value: p.Value})
		}
	}
}

// maxQueued bounds the runs a suite keeps queued with different params:
// each is a status entry, and Trim never drops unfinished runs.
const maxQueued = 4
