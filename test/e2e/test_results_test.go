//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	. "github.com/devloop-dev/devloop/test/builder"
	. "github.com/devloop-dev/devloop/test/e2e/fixture"
)

// resultsModule has a test that passes, one that fails, one that is
// skipped and one that fails the first time only: it leaves a marker in
// the suite's cache volume ($HOME/.cache, kept between runs), so the next
// run passes it.
var resultsModule = Files{
	"go.mod": GoModule("example.com/results"),
	"results_test.go": `package results

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPasses(t *testing.T) {}

func TestFails(t *testing.T) { t.Fatal("always fails") }

func TestSkipped(t *testing.T) { t.Skip("not here") }

func TestFailsOnce(t *testing.T) {
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(cache, "failed-once")
	if _, err := os.Stat(marker); err == nil {
		return
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Fatal("fails the first time")
}
`,
}

// TestRunResultsOnAKubelet is issue 19's per-test results on the real
// cluster: a suite writing `go test -json` to its declared report path
// runs twice; the report sidecar (a native sidecar the kubelet stops when
// the tests end) summarises the report into its termination message, and
// each run's status holds the counts and the failed tests' names (the
// second run's show the test that failed once passing, from the cache
// volume's state). `kubectl devloop status` shows them.
func TestRunResultsOnAKubelet(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := need(t)
	ns := namespace(t, "e2e-results")
	suite := GoTestSuite("unit", goImage, "go test -json -count=1 ./... > report.json")
	suite.Report = &v1alpha1.TestReport{Path: "report.json", Format: v1alpha1.ReportGoTestJSON}
	env := newEnv(ns, "results").Tests(suite).Build()
	pushOnly(t, env, sourceDir(t, resultsModule))
	g.Expect(c.Client.Create(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)

	runOnce := func(n int64) *v1alpha1.TestRun {
		setTrigger(t, env, "unit")
		run := waitTestRun(t, key, "unit", n)
		t.Logf("run #%d: %s in %s (job %s), results %+v, message %q", n, run.Result,
			run.CompletionTime.Sub(run.StartTime.Time).Round(100*time.Millisecond), run.JobName, run.Results, run.Message)
		return run
	}

	first := runOnce(1)
	g.Expect(first.Result).To(Equal(v1alpha1.ResultFailed), first.LogTail)
	g.Expect(first.Results).NotTo(BeNil(), "no per-test results: %s\n%s", first.Message, first.LogTail)
	g.Expect(*first.Results).To(Equal(v1alpha1.TestResults{Passed: 1, Failed: 2, Skipped: 1,
		Failures: []string{"results.TestFails", "results.TestFailsOnce"}}))

	// What the kubelet did: the report step is a native sidecar (an init
	// container that restarts Always), stopped after the tests, its
	// summary in its termination message.
	job := &batchv1.Job{}
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: first.JobName}, job)).To(Succeed())
	pods := &corev1.PodList{}
	g.Expect(c.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"job-name": job.Name})).To(Succeed())
	g.Expect(pods.Items).NotTo(BeEmpty())
	var sidecar *corev1.ContainerStatus
	for _, ic := range pods.Items[0].Spec.InitContainers {
		if ic.RestartPolicy == nil || *ic.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			continue
		}
		for i, st := range pods.Items[0].Status.InitContainerStatuses {
			if st.Name == ic.Name {
				sidecar = &pods.Items[0].Status.InitContainerStatuses[i]
			}
		}
	}
	g.Expect(sidecar).NotTo(BeNil(), "no native sidecar status in pod %s", pods.Items[0].Name)
	g.Expect(sidecar.State.Terminated).NotTo(BeNil(), "the kubelet stopped the sidecar")
	g.Expect(sidecar.State.Terminated.Message).To(ContainSubstring("TestFails"))
	t.Logf("report sidecar %s: exit %d, termination message %d bytes", sidecar.Name,
		sidecar.State.Terminated.ExitCode, len(sidecar.State.Terminated.Message))

	second := runOnce(2)
	g.Expect(second.Results).NotTo(BeNil(), "%s\n%s", second.Message, second.LogTail)
	// The suite runs an external image and depends on no built image, so
	// its runs carry no digests and are never compared for flaky tests
	// (testrun.Flaky: the code under test may have changed between them).
	g.Expect(*second.Results).To(Equal(v1alpha1.TestResults{Passed: 2, Failed: 1, Skipped: 1,
		Failures: []string{"results.TestFails"}}))

	var out, errOut lockedBuffer
	g.Expect(<-runPlugin(ctx, c.Kubeconfig, ns, &out, &errOut, "status", "results")).To(Equal(0), "%s%s", &out, &errOut)
	for _, want := range []string{"2 passed, 1 failed, 1 skipped", "failed: results.TestFails"} {
		g.Expect(out.String()).To(ContainSubstring(want))
	}
	t.Logf("status:\n%s", strings.TrimSpace(out.String()))
}
