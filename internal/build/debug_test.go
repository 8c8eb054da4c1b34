package build

import (
	"slices"
	"testing"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

func TestDebugRunEnvMergesGOFLAGS(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []v1alpha1.EnvVar
		want []v1alpha1.EnvVar
	}{
		{"no GOFLAGS adds it",
			[]v1alpha1.EnvVar{{Name: "CGO_ENABLED", Value: "0"}},
			[]v1alpha1.EnvVar{{Name: "CGO_ENABLED", Value: "0"}, {Name: "GOFLAGS", Value: DebugGCFlags}}},
		{"other flags kept, gcflags appended",
			[]v1alpha1.EnvVar{{Name: "GOFLAGS", Value: "-mod=vendor  -trimpath"}},
			[]v1alpha1.EnvVar{{Name: "GOFLAGS", Value: "-mod=vendor -trimpath " + DebugGCFlags}}},
		{"an optimizing gcflags entry dropped, quoted or not",
			[]v1alpha1.EnvVar{{Name: "GOFLAGS", Value: `-gcflags=-B '-ldflags=-s -w' "--gcflags=all=-m -m"`}},
			[]v1alpha1.EnvVar{{Name: "GOFLAGS", Value: `'-ldflags=-s -w' ` + DebugGCFlags}}},
		{"the last GOFLAGS is the one merged",
			[]v1alpha1.EnvVar{{Name: "GOFLAGS", Value: "-mod=mod"}, {Name: "X", Value: "1"}, {Name: "GOFLAGS", Value: "-trimpath"}},
			[]v1alpha1.EnvVar{{Name: "GOFLAGS", Value: "-mod=mod"}, {Name: "X", Value: "1"}, {Name: "GOFLAGS", Value: "-trimpath " + DebugGCFlags}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.env)
			got := DebugRunEnv(tc.env)
			if !slices.Equal(got, tc.want) {
				t.Errorf("DebugRunEnv(%v) = %v, want %v", tc.env, got, tc.want)
			}
			if !slices.Equal(tc.env, in) {
				t.Errorf("DebugRunEnv changed its input: %v", tc.env)
			}
			// Merging twice changes nothing more: the step is idempotent.
			if again := DebugRunEnv(got); !slices.Equal(again, got) {
				t.Errorf("DebugRunEnv twice = %v, want %v", again, got)
			}
		})
	}
}

func TestSplitGoFlagsKeepsQuotedSpaces(t *testing.T) {
	got := splitGoFlags(` -a  '-b=c d' "-e=f g"	-h `)
	want := []string{"-a", `'-b=c d'`, `"-e=f g"`, "-h"}
	if !slices.Equal(got, want) {
		t.Errorf("splitGoFlags = %q, want %q", got, want)
	}
}
