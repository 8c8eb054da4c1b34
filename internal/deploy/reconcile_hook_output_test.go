package deploy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// hookLog is what the failing hook's container prints: a long preamble,
// then the lines that say why.
var hookLog = strings.Repeat("applying migration step\n", 100) + "error: migration 0042 failed\ntable users is locked by another session\n"

// TestFailedHookShowsItsOutput is issue 36.4: a pre-install hook Job that
// fails said only BackoffLimitExceeded. Every attempt's hook Job fails
// (its pod's container exits 3, printing why); once the release stalls,
// the message names the Job, its pod and container, and ends with the end
// of the container's own output, bounded (not the preamble), as failed
// builds and test runs do.
func TestFailedHookShowsItsOutput(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	key, _ := installHookEnv(t)
	seen := map[types.UID]bool{}
	var env *v1alpha1.DevEnvironment
	for attempt := 1; ; attempt++ {
		var job *batchv1.Job
		g.Eventually(func(g Gomega) {
			env = &v1alpha1.DevEnvironment{}
			g.Expect(operatortest.Admin.Get(ctx, key, env)).To(Succeed())
			if operatortest.EnvCondition(env, v1alpha1.ConditionStalled) != nil {
				job = nil
				return
			}
			job = &batchv1.Job{}
			g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: "init-setup"}, job)).To(Succeed())
			g.Expect(seen[job.UID]).To(BeFalse(), "a new hook Job for attempt %d", attempt)
		}, operatortest.Timeout).Should(Succeed())
		if job == nil {
			break
		}
		g.Expect(attempt).To(BeNumerically("<=", 3), "stalled after three attempts")
		seen[job.UID] = true
		failHookPod(t, job, attempt)
	}
	stalled := operatortest.EnvCondition(env, v1alpha1.ConditionStalled)
	t.Logf("Stalled: %s", stalled.Message)
	msg := env.Status.Component("init").Message
	g.Expect(msg).To(ContainSubstring("BackoffLimitExceeded"))
	g.Expect(msg).To(MatchRegexp(`hook job init-setup \(pod init-setup-attempt\d, container setup\) printed: .*error: migration 0042 failed; table users is locked by another session`))
	g.Expect(len(msg)).To(BeNumerically("<=", v1alpha1.MaxComponentMessage))
	g.Expect(strings.Count(msg, "applying migration step")).To(BeNumerically("<", 20), "the end of the output, bounded")
	g.Expect(stalled.Message).To(ContainSubstring("table users is locked by another session"))
}

// failHookPod makes the pod the job controller would have made for a hook
// Job, its container ended with code 3 after printing hookLog, and fails
// the Job (envtest runs no controllers).
func failHookPod(t *testing.T, job *batchv1.Job, attempt int) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: fmt.Sprintf("%s-attempt%d", job.Name, attempt),
			Labels:          map[string]string{batchv1.JobNameLabel: job.Name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}}},
		Spec: job.Spec.Template.Spec,
	}
	g.Expect(operatortest.Admin.Create(ctx, pod)).To(Succeed())
	pod.Status.Phase = corev1.PodFailed
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{operatortest.Terminated("setup", 3, "Error")}
	g.Expect(operatortest.Admin.Status().Update(ctx, pod)).To(Succeed())
	operatortest.PodLogs.Set(job.Namespace, pod.Name, "setup", hookLog)
	operatortest.EndJob(t, job.Namespace, job.Name, false)
}
