package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// now is the fixed time the golden tree is rendered at.
var now = time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(-d)} }

// observedTeam is teamSpec as the operator would report it mid-rollout:
// crds Ready, web Failed on its build, unit passed, e2e running, smoke
// never run.
func observedTeam(env *v1alpha1.DevEnvironment) {
	env.Status = v1alpha1.DevEnvironmentStatus{
		ObservedGeneration: env.Generation,
		Conditions: []metav1.Condition{
			operatorCondition(env, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonBuildFailed, "component web: build failed: exit code 2"),
			operatorCondition(env, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonBuildFailed, "component web: build failed: exit code 2"),
		},
		Sources: []v1alpha1.SourceStatus{{Name: "app", Revision: "dev@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", Digest: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}},
		Components: []v1alpha1.ComponentStatus{
			{Name: "crds", Phase: v1alpha1.PhaseReady, Inventory: []v1alpha1.ObjectRef{{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition", Name: "widgets.team.test"}}},
			{Name: "web", Phase: v1alpha1.PhaseFailed, Message: "build failed: exit code 2\nmore detail", Images: []v1alpha1.ImageStatus{{
				Name: "web", Repository: "registry.test/team/web", Digest: "sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210",
				Tags:  []string{"c-1a2b3c", "rev-0123456"},
				Build: &v1alpha1.BuildStatus{Job: "web-build-1a2b3c", Result: v1alpha1.BuildFailed, ExitCode: ptr.To[int32](2)},
			}}, Release: &v1alpha1.ReleaseStatus{Name: "web", Namespace: "web-system", Revision: 3, Status: "deployed"}},
		},
		Tests: []v1alpha1.TestStatus{
			{Name: "unit", Runs: []v1alpha1.TestRun{
				{Number: 2, Result: v1alpha1.ResultFailed, ExitCode: ptr.To[int32](1), StartTime: at(5 * time.Minute), CompletionTime: at(3 * time.Minute), JobName: "unit-2", LogTail: "ok\n--- FAIL: TestX\n"},
				{Number: 1, Result: v1alpha1.ResultPassed, ExitCode: ptr.To[int32](0), StartTime: at(time.Hour), CompletionTime: at(50 * time.Minute), JobName: "unit-1"},
			}},
			{Name: "e2e", Message: "", Runs: []v1alpha1.TestRun{{Number: 7, Result: v1alpha1.ResultRunning, StartTime: at(40 * time.Second), JobName: "e2e-7"}}},
			{Name: "smoke", Message: "waiting for web to be Ready"},
		},
		ComponentsReady:    "1/2",
		LastTestResult:     "unit: Failed",
		LastHandledTrigger: "unit",
	}
}

func TestStatusTreeGolden(t *testing.T) {
	env := teamEnv("team-a", "team").Obj()
	env.Generation = 4
	observedTeam(env)
	var buf bytes.Buffer
	renderTree(&buf, newStatusView(env), palette{}, now)
	golden := filepath.Join("testdata", "status.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if buf.String() != string(want) {
		t.Fatalf("tree differs from %s (run with -update after checking):\n%s", golden, buf.String())
	}
}

func TestStatusTreeColoursOnlyWhenAsked(t *testing.T) {
	env := teamEnv("team-a", "team").Obj()
	env.Generation = 4
	observedTeam(env)
	var plain, coloured bytes.Buffer
	renderTree(&plain, newStatusView(env), palette{}, now)
	renderTree(&coloured, newStatusView(env), palette{on: true}, now)
	if strings.Contains(plain.String(), "\x1b[") {
		t.Fatal("escape codes without colour")
	}
	if !strings.Contains(coloured.String(), "\x1b[32mReady\x1b[0m") || !strings.Contains(coloured.String(), "\x1b[31mFailed\x1b[0m") {
		t.Fatalf("want green Ready and red Failed:\n%q", coloured.String())
	}
}

// The status command against the API server: the tree, and the JSON view
// in DAG order for scripts.
func TestStatusCommand(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "team", teamSpec())
	playOperator(t, ns, "team", observedTeam)

	r := plugin(t, "status", "team", "-n", ns)
	if r.code != 0 {
		t.Fatal(r)
	}
	for _, want := range []string{
		"devenvironment/team (namespace " + ns + ")  NotReady (BuildFailed)",
		"Stalled (BuildFailed): component web: build failed: exit code 2",
		"└─ web  Failed  ← crds",
		"image web  registry.test/team/web@fedcba987654  tags: c-1a2b3c, rev-0123456",
		"release web in web-system  revision 3  deployed",
		"unit  #2 Failed (exit 1,",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("tree lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(r.out)
	}

	r = plugin(t, "status", "team", "-n", ns, "-o", "json")
	if r.code != 0 {
		t.Fatal(r)
	}
	var v StatusView
	if err := json.Unmarshal([]byte(r.out), &v); err != nil {
		t.Fatalf("%v\n%s", err, r.out)
	}
	if len(v.Components) != 2 || v.Components[0].Name != "crds" || v.Components[1].Name != "web" || v.Components[1].DependsOn[0] != "crds" {
		t.Fatalf("components not in DAG order with edges: %+v", v.Components)
	}
	if v.Ready || v.Tests[0].Name != "unit" || v.Tests[0].LastRun.Number != 2 || v.Tests[0].LastRun.Result != v1alpha1.ResultFailed {
		t.Fatalf("tests: %+v", v.Tests)
	}

	r = plugin(t, "status", "team", "-n", ns, "-o", "yaml")
	if r.code != 0 || !strings.Contains(r.out, "lastHandledTrigger: unit") {
		t.Fatalf("yaml view:\n%s", r)
	}
	r = plugin(t, "status", "team", "-n", ns, "-o", "wide")
	if r.code != 1 || !strings.Contains(r.err, `--output "wide": want json or yaml`) {
		t.Fatalf("bad -o:\n%s", r)
	}
}
