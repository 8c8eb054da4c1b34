package message

import (
	"strings"
	"testing"
)

// The three kinds of STATUS cell issue 43 found at 500-860 characters,
// as the operator wrote them.
const (
	digest = "sha256:4f1c9d0e8b7a6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d"
	// pullFailure quotes the digest three times.
	pullFailure = `1 of 2 components not Ready: operator; component operator: pod operator-7d9f8b6c5-x2x9k: container manager: ImagePullBackOff: ` +
		`Back-off pulling image "localhost:5001/team-a/controller@` + digest + `": ErrImagePull: failed to pull and unpack image ` +
		`"localhost:5001/team-a/controller@` + digest + `": failed to resolve reference "localhost:5001/team-a/controller@` + digest +
		`": localhost:5001/team-a/controller@` + digest + `: not found`
	// unknownHost repeats the https and the http error.
	unknownHost = `component api: registry host registry.team-a.invalid does not resolve (no such host): check spec.registry.prefix: ` +
		`pushing registry.team-a.invalid/team-a/api: Get "https://registry.team-a.invalid/v2/": dial tcp: lookup registry.team-a.invalid on 10.96.0.10:53: no such host; ` +
		`Get "http://registry.team-a.invalid/v2/": dial tcp: lookup registry.team-a.invalid on 10.96.0.10:53: no such host`
	// helmValues is a Helm render failure naming the field deep inside.
	helmValues = `component operator: rendering chart deploy/chart with spec.components[2].helm.values: template: gpu-operator/templates/clusterpolicy.yaml:12:14: ` +
		`executing "gpu-operator/templates/clusterpolicy.yaml" at <.Values.validator.repository>: nil pointer evaluating interface {}.repository`
)

func TestSummaryIsShortAndSaysWhat(t *testing.T) {
	for _, tc := range []struct {
		name, msg string
		// want are what the summary must still say; once, what it must
		// say only once.
		want []string
		once string
	}{
		{"a pull failure quoting a digest three times", pullFailure, []string{"component operator", "not found"}, "sha256:4f1c9d0e8b7a"},
		{"an unknown host with the https and the http error", unknownHost, []string{"component api", "does not resolve", "spec.registry.prefix"}, "spec.registry.prefix"},
		{"a Helm values failure", helmValues, []string{"component operator", "spec.components[2].helm.values"}, "spec.components[2].helm.values"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Summary(tc.msg)
			t.Logf("%d -> %d: %s", len(tc.msg), len(got), got)
			if len(got) > MaxSummary {
				t.Errorf("summary is %d bytes, more than %d: %s", len(got), MaxSummary, got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("summary %q does not say %q", got, w)
				}
			}
			if n := strings.Count(got, tc.once); n > 1 {
				t.Errorf("summary says %q %d times: %s", tc.once, n, got)
			}
		})
	}
}

func TestSummaryKeepsShortMessages(t *testing.T) {
	for _, msg := range []string{"2/2 components ready", "reconciliation is suspended (spec.suspend)", ""} {
		if got := Summary(msg); got != msg {
			t.Errorf("Summary(%q) = %q", msg, got)
		}
	}
}

// TestSummaryIsBoundedWhateverTheMessage: long messages of every shape
// (one long part, many parts, a long field path) stay within MaxSummary.
func TestSummaryIsBoundedWhateverTheMessage(t *testing.T) {
	for _, msg := range []string{
		strings.Repeat("x", 5000),
		strings.Repeat("part: ", 500),
		"component a: check spec." + strings.Repeat("long.", 60) + "field: " + strings.Repeat("cause ", 50),
		strings.Repeat("a; ", 300) + "spec.registry.prefix",
	} {
		if got := Summary(msg); len(got) > MaxSummary || got == "" {
			t.Errorf("Summary of a %d-byte message is %d bytes: %q", len(msg), len(got), got)
		}
	}
}
