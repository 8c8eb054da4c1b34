package testrun

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// recordResults puts the per-test results of a suite with a report into
// its ended run: the report step's summary from the pod's status, and
// the tests flaky against the suite's other runs. Without a summary the
// run keeps no results and its message says why; its result still
// follows the test container's exit code. Only runs whose test container
// ran to its end have a report to read.
func (p *testPass) recordResults(suite *v1alpha1.TestSuite, run *v1alpha1.TestRun, podList []corev1.Pod, out *Outcome) {
	if suite.Report == nil || (out.Result != v1alpha1.ResultPassed && out.Result != v1alpha1.ResultFailed) {
		return
	}
	results, why := ReportSummary(podList, out.Pod)
	if results == nil {
		note := "no test results: " + why
		if out.Message != "" {
			note = out.Message + "; " + note
		}
		out.Message = note
		return
	}
	run.Results = results
	run.Results.Flaky = Flaky(run, p.testStatus(suite.Name).Runs)
}

// ReportSummary is the results the report step of pod wrote, or why
// there are none.
func ReportSummary(podList []corev1.Pod, pod string) (*v1alpha1.TestResults, string) {
	for i := range podList {
		if podList[i].Name != pod {
			continue
		}
		cs := containerStatus(&podList[i], ContainerReport, true)
		if cs == nil || cs.State.Terminated == nil {
			// The kubelet ends a pod only after its sidecars, so this is
			// a pod that was deleted or lost.
			return nil, "the report step did not finish"
		}
		return DecodeSummary(cs.State.Terminated.Message)
	}
	return nil, "the run's pod is gone"
}
