package cli

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// The component panel's objects: each inventory entry read as the user
// with its kstatus. Without a kubelet a Deployment never becomes
// available (InProgress); a ConfigMap is Current; an object deleted since
// it was applied is NotFound. An entry without a version is read at the
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
		}}}
	})
	d := startDashboard(t, testOptions(), "-n", ns)
	var got struct {
		Objects []struct{ Kind, Name, Status, Message string }
		More    int
	}
	d.getJSON(t, "/api/objects?"+query("namespace", ns, "env", "team", "component", "web"), &got)
	want := map[string]string{"ConfigMap/web-config": "Current", "Deployment/web": "InProgress", "Secret/web-gone": "NotFound"}
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
