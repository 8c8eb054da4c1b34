package liveupdate_test

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestLiveUpdateSyncsOnlyTheEnvironmentsOwnPods: two namespaces, two
// environments, both acting as a ServiceAccount named deployer, the
// operator under the chart's RBAC. Team-b's environment also applies a
// ConfigMap into team-a's namespace (its deployer was given that, and
// reading pods there), so its sync lists team-a's pods. A live update of
// team-b's image reaches the pod of team-b's own Deployment only: not a
// pod of team-a's Deployment that runs the same image reference, not a
// pod started by hand in team-b's namespace, not one of a ReplicaSet
// team-b's environment did not deploy.
func TestLiveUpdateSyncsOnlyTheEnvironmentsOwnPods(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	nsA, envA := deployLiveEnv(t)
	operatortest.WaitForEnv(t, client.ObjectKeyFromObject(envA), operatortest.ExpectReadyAndCurrent)

	nsB := operatortest.DeployNamespace(t)
	grantIn(t, nsA, nsB, operatortest.Deployer,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"replicasets", "deployments"}, Verbs: []string{"get", "list", "watch"}})
	filesB := func(binary string) map[string]string {
		files := liveSource(binary, "<h1>b</h1>")
		files["deploy/shared.yaml"] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-team-b, namespace: %s}\ndata: {a: b}\n", nsA)
		return files
	}
	operatortest.AppFiles(t, nsB, filesB("binary b1"))
	envB := liveEnv(nsB)
	g.Expect(operatortest.Admin.Create(ctx, envB)).To(Succeed())
	keyB := client.ObjectKeyFromObject(envB)
	operatortest.WaitForEnv(t, keyB, func(g Gomega, cur *v1alpha1.DevEnvironment) {
		g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: nsB, Name: "web"}, &appsv1.Deployment{})).To(Succeed(), "status: %+v", cur.Status)
	})
	operatortest.MarkDeploymentAvailable(t, nsB, "web")
	envB = operatortest.WaitForEnv(t, keyB, operatortest.ExpectReadyAndCurrent)
	g.Expect(envB.Status.Component("web").Inventory).To(ContainElement(HaveField("Namespace", nsA)), "team-b's sync lists pods in team-a's namespace")
	imageB := webDeploymentNow(g, nsB).Spec.Template.Spec.Containers[0].Image

	// Team-b's own pod, and pods running the same image that team-b's
	// environment did not deploy.
	runningPod(t, nsB, "web-b", imageB)
	labels := webDeploymentNow(g, nsB).Spec.Template.Labels
	byHand := createPod(t, nil, nsB, "by-hand", labels, imageB)
	testenv.MarkPodRunning(t, operatortest.Admin, byHand, false)
	foreign := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: "foreign"},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: webDeploymentNow(g, nsB).Spec.Template}}
	g.Expect(operatortest.Admin.Create(ctx, foreign)).To(Succeed())
	testenv.MarkPodRunning(t, operatortest.Admin, createPod(t, foreign, nsB, "foreign-1", labels, imageB), false)
	dA := webDeploymentNow(g, nsA)
	rsA := controlledBy(t, dA, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "web-team-a"},
		Spec: appsv1.ReplicaSetSpec{Selector: dA.Spec.Selector, Template: dA.Spec.Template}})
	testenv.MarkPodRunning(t, operatortest.Admin, createPod(t, rsA, nsA, "team-a-runs-b", labels, imageB), false)

	operatortest.AppFiles(t, nsB, filesB("binary b2"))
	operatortest.RequestReconcile(t, envB)
	var digest string
	g.Eventually(func(g Gomega) {
		cur := &v1alpha1.DevEnvironment{}
		g.Expect(operatortest.Admin.Get(ctx, keyB, cur)).To(Succeed())
		ist := cur.Status.Component("web").Image("web")
		g.Expect(ist.LastUpdate).To(Equal(v1alpha1.UpdateLive), "reason: %s", ist.UpdateReason)
		digest = ist.Digest
		g.Expect(podLiveDigest(g, nsB, "web-b")).To(Equal(digest))
	}, operatortest.Timeout).Should(Succeed())
	g.Expect(operatortest.LiveSyncs.Of(nsB, "web-b", digest)).To(HaveLen(1))
	for _, pod := range []struct{ ns, name string }{{nsB, "by-hand"}, {nsB, "foreign-1"}, {nsA, "team-a-runs-b"}} {
		g.Expect(operatortest.LiveSyncs.Of(pod.ns, pod.name, digest)).To(BeEmpty(), "pod %s/%s is not team-b's environment's", pod.ns, pod.name)
		g.Expect(podLiveDigest(g, pod.ns, pod.name)).To(BeEmpty())
	}
}

// grantIn gives the ServiceAccount saNS/sa rules in namespace ns.
func grantIn(t *testing.T, ns, saNS, sa string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	g := NewWithT(t)
	name := saNS + "-" + sa
	g.Expect(operatortest.Admin.Create(context.Background(), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules})).To(Succeed())
	g.Expect(operatortest.Admin.Create(context.Background(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: saNS, Name: sa}}})).To(Succeed())
}
