package build_test

import (
	"context"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestDebugRefusedOnTheHostNetwork: delve listens on the pod's loopback,
// which for a pod on the host network is the node's, where every
// hostNetwork pod and process of the node reaches its unauthenticated
// API. An image in debug mode whose Deployment sets hostNetwork is not
// deployed under delve: the environment is Stalled, the message naming
// the pod template's field and the annotation.
func TestDebugRefusedOnTheHostNetwork(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, env := debugAPIEnv(t, hostNetworkDeployment)
	g.Expect(operatortest.Admin.Create(ctx, env)).To(Succeed())

	var job batchv1.Job
	g.Eventually(func(g Gomega) {
		jobs := operatortest.BuilderJobs(g, ns)
		g.Expect(jobs).To(HaveKey("linux-amd64"))
		job = jobs["linux-amd64"]
	}, operatortest.Timeout).Should(Succeed())
	finishBuild(t, ns, "api", job)

	cur := operatortest.WaitForEnv(t, client.ObjectKeyFromObject(env), func(g Gomega, cur *v1alpha1.DevEnvironment) {
		stalled := operatortest.EnvCondition(cur, "Stalled")
		g.Expect(stalled).NotTo(BeNil(), "conditions: %s", operatortest.ConditionsSummary(cur))
		g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue), "conditions: %s", operatortest.ConditionsSummary(cur))
		g.Expect(stalled.Message).To(ContainSubstring("spec.template.spec.hostNetwork"))
		g.Expect(stalled.Message).To(ContainSubstring(v1alpha1.DebugAnnotation))
	})
	operatortest.ExpectKstatus(t, cur, status.FailedStatus)
	d := &appsv1.Deployment{}
	err := operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "api"}, d)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "nothing runs delve on the node's loopback: %v", err)
}

// hostNetworkDeployment runs the api image on the node's network.
const hostNetworkDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
spec:
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      hostNetwork: true
      containers:
      - name: api
        image: api
`
