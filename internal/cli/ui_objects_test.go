package cli

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/internal/ui"
)

// The component panel's objects: each inventory entry read as the user
// with its kstatus. Without a kubelet a Deployment never becomes
// available (InProgress); a ConfigMap is Current; an object deleted since
// it was applied is NotFound, and so is one whose kind the cluster no
// longer serves (its CRD deleted). An entry without a version is read at the
// server's preferred one.
func TestUIObjectsKstatus(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "ui-objects")
	createEnv(t, ns, "team", teamSpec())
	labels := map[string]string{"app": "web"}
	create(t,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-config"}, Data: map[string]string{"a": "b"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "example.test/web:dev"}}}}}})
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		env.Status.Components = []v1alpha1.ComponentStatus{{Name: "web", Inventory: []v1alpha1.ObjectRef{
			{Version: "v1", Kind: "ConfigMap", Namespace: ns, Name: "web-config"},
			{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: ns, Name: "web"},
			{Kind: "Secret", Namespace: ns, Name: "web-gone"},
			{Group: "team.test", Version: "v1", Kind: "Widget", Namespace: ns, Name: "w"},
		}}}
	})
	d := startDashboard(t, testOptions(), "-n", ns)
	var got struct {
		Objects []struct{ Kind, Name, Status, Message string }
		More    int
	}
	d.getJSON(t, "/api/objects?"+query("namespace", ns, "env", "team", "component", "web"), &got)
	want := map[string]string{"ConfigMap/web-config": "Current", "Deployment/web": "InProgress", "Secret/web-gone": "NotFound", "Widget/w": "NotFound"}
	if len(got.Objects) != len(want) || got.More != 0 {
		t.Fatalf("objects %+v, want %v", got, want)
	}
	for _, o := range got.Objects {
		if s := want[o.Kind+"/"+o.Name]; s != o.Status {
			t.Errorf("%s/%s: %s (%s), want %s", o.Kind, o.Name, o.Status, o.Message, s)
		}
		t.Logf("%s/%s: %s: %s", o.Kind, o.Name, o.Status, o.Message)
	}
}

// The objects are read as the user: one the user's RBAC does not cover is
// Unknown with the refusal, not read with other rights; another
// namespace's environment is refused outright.
func TestUIObjectsAreReadAsTheUser(t *testing.T) {
	nsA := testenv.Namespace(t, k8s, "ui-objects-a")
	nsB := testenv.Namespace(t, k8s, "ui-objects-b")
	createEnv(t, nsA, "mine", teamSpec())
	createEnv(t, nsB, "theirs", teamSpec())
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "web-secret"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "web-config"}})
	for _, ns := range []string{nsA, nsB} {
		name := map[string]string{nsA: "mine", nsB: "theirs"}[ns]
		playOperator(t, ns, name, func(env *v1alpha1.DevEnvironment) {
			env.Status.Components = []v1alpha1.ComponentStatus{{Name: "web", Inventory: []v1alpha1.ObjectRef{
				{Version: "v1", Kind: "ConfigMap", Namespace: nsA, Name: "web-config"},
				{Version: "v1", Kind: "Secret", Namespace: nsA, Name: "web-secret"},
			}}}
		})
	}
	user := "ui-bob-" + nsA
	create(t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "dev"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"devenvironments"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps", "events"}, Verbs: []string{"get", "list", "watch"}},
	}}, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "dev"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "dev"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}})

	d := startDashboard(t, testOptions(), "--as", user, "-n", nsA)
	var got struct {
		Objects []struct{ Kind, Status, Message string }
	}
	d.getJSON(t, "/api/objects?"+query("namespace", nsA, "env", "mine", "component", "web"), &got)
	if len(got.Objects) != 2 || got.Objects[0].Status != "Current" || got.Objects[1].Status != "Unknown" || !strings.Contains(got.Objects[1].Message, "forbidden") {
		t.Fatalf("objects as %s: %+v; want the ConfigMap Current and the Secret Unknown (forbidden)", user, got)
	}
	resp, err := d.client.Get(d.base + "/api/objects?" + query("namespace", nsB, "env", "theirs", "component", "web"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK || !strings.Contains(string(body), "forbidden") {
		t.Fatalf("objects of namespace B as %s: %s %s, want refused as forbidden", user, resp.Status, body)
	}
}

// One panel reads at most ui.MaxObjects objects and says how many more
// the inventory lists.
func TestUIObjectsAreBounded(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "ui-objects-max")
	createEnv(t, ns, "team", teamSpec())
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		var inv []v1alpha1.ObjectRef
		for i := range ui.MaxObjects + 5 {
			inv = append(inv, v1alpha1.ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: ns, Name: fmt.Sprintf("cm-%d", i)})
		}
		env.Status.Components = []v1alpha1.ComponentStatus{{Name: "web", Inventory: inv}}
	})
	d := startDashboard(t, testOptions(), "-n", ns)
	var got struct {
		Objects []struct{ Name, Status string }
		More    int
	}
	d.getJSON(t, "/api/objects?"+query("namespace", ns, "env", "team", "component", "web"), &got)
	if len(got.Objects) != ui.MaxObjects || got.More != 5 || got.Objects[0].Name != "cm-0" || got.Objects[0].Status != "NotFound" {
		t.Fatalf("%d objects (first %+v), %d more; want %d and 5 more", len(got.Objects), got.Objects[0], got.More, ui.MaxObjects)
	}
}

// A Helm component has no inventory (Helm keeps the release's manifest):
// its panel reads the workloads status lists for its release, with their
// kstatus, and counts the ones status left out as more.
func TestUIObjectsOfAHelmComponentAreItsReleasesWorkloads(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "ui-objects-helm")
	createEnv(t, ns, "team", teamSpec())
	labels := map[string]string{"app": "vc-scheduler"}
	create(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vc-scheduler"}, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "s", Image: "example.test/s:dev"}}}}}})
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		env.Status.Components = []v1alpha1.ComponentStatus{{Name: "web", Release: &v1alpha1.ReleaseStatus{
			Name: "vcsim", Namespace: ns, Revision: 2, Status: "deployed", MoreWorkloads: 3,
			Workloads: []v1alpha1.ObjectRef{
				{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: ns, Name: "vc-scheduler"},
				{Group: "apps", Version: "v1", Kind: "StatefulSet", Namespace: ns, Name: "vc-gone"},
			},
		}}}
	})
	d := startDashboard(t, testOptions(), "-n", ns)
	var got struct {
		Objects []struct{ Kind, Name, Status string }
		More    int
	}
	d.getJSON(t, "/api/objects?"+query("namespace", ns, "env", "team", "component", "web"), &got)
	if len(got.Objects) != 2 || got.More != 3 ||
		got.Objects[0].Name != "vc-scheduler" || got.Objects[0].Status != "InProgress" ||
		got.Objects[1].Name != "vc-gone" || got.Objects[1].Status != "NotFound" {
		t.Fatalf("objects of a Helm component: %+v; want the scheduler InProgress, vc-gone NotFound and 3 more", got)
	}
}
