package build

import (
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

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

func TestDebugImageSpecInstallsDelveAndKeepsTheCommand(t *testing.T) {
	img := &v1alpha1.ImageSpec{Name: "server", Source: "app",
		Run:    &v1alpha1.BuildRun{Image: "golang:1.25", Command: []string{"make", "server"}, Env: []v1alpha1.EnvVar{{Name: "GOFLAGS", Value: "-mod=vendor"}}},
		Layers: []v1alpha1.LayerMapping{{From: "bin/server", To: "/server"}}}
	got := DebugImageSpec(img)
	if !slices.Equal(got.Run.Command[:4], []string{"sh", "-c", delveInstall, "sh"}) || !slices.Equal(got.Run.Command[4:], []string{"make", "server"}) {
		t.Errorf("command %q, want the delve install then make server", got.Run.Command)
	}
	if want := []v1alpha1.EnvVar{{Name: "GOFLAGS", Value: "-mod=vendor " + DebugGCFlags}}; !slices.Equal(got.Run.Env, want) {
		t.Errorf("env %v, want %v", got.Run.Env, want)
	}
	if want := []v1alpha1.LayerMapping{{From: "bin/server", To: "/server"}, {From: delveWorkspacePath, To: v1alpha1.DebugDelvePath, Mode: "0755"}}; !slices.Equal(got.Layers, want) {
		t.Errorf("layers %v, want %v", got.Layers, want)
	}
	// The spec it came from is unchanged: it is the normal build's.
	if len(img.Layers) != 1 || len(img.Run.Command) != 2 || img.Run.Env[0].Value != "-mod=vendor" {
		t.Errorf("DebugImageSpec changed its input: %+v %+v", img, img.Run)
	}
	for _, want := range []string{"go install " + DelveModule + "@" + DelveVersion, "GOFLAGS= GOBIN= CGO_ENABLED=0", `exec "$@"`} {
		if !strings.Contains(delveInstall, want) {
			t.Errorf("delve install lacks %q", want)
		}
	}
	noRun := &v1alpha1.ImageSpec{Name: "static"}
	if DebugImageSpec(noRun) != noRun {
		t.Error("an image without a run step changed")
	}
}

// A debug build runs the program under delve, not the supervisor: it has
// no live paths, so the program stays a plain file.
func TestDebugBuildHasNoLivePaths(t *testing.T) {
	g := NewWithT(t)
	img := &v1alpha1.ImageSpec{Name: "web", Run: &v1alpha1.BuildRun{Command: []string{"go", "build"}},
		LiveUpdate: &v1alpha1.LiveUpdate{Paths: []string{"/server"}}}
	g.Expect(DebugImageSpec(img).LiveUpdate).To(BeNil())
	g.Expect(img.LiveUpdate).NotTo(BeNil(), "the spec itself is not changed")
}
