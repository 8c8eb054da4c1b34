package cli

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// The new actions and reads are done as the user: a user who may read
// but not patch the environments of namespace A gets Rebuild refused as
// forbidden (no reconcile request is written), Rebuild in namespace B
// refused, a Helm component's values shown from the spec with the
// refusal to read the release's Secret, and the combined log of B
// refused.
func TestUIRebuildValuesAndCombinedLogAreAsTheUser(t *testing.T) {
	ctx := context.Background()
	nsA := testenv.Namespace(t, k8s, "ui-asuser-a")
	nsB := testenv.Namespace(t, k8s, "ui-asuser-b")
	spec := teamSpec()
	spec.Components = append(spec.Components, v1alpha1.Component{Name: "chart", Helm: &v1alpha1.HelmSpec{Chart: v1alpha1.ChartRef{Source: "app", Path: "chart"},
		Values: &apiextensionsv1.JSON{Raw: []byte(`{"replicas":2}`)}}})
	createEnv(t, nsA, "mine", spec)
	createEnv(t, nsB, "theirs", teamSpec())
	playOperator(t, nsA, "mine", func(env *v1alpha1.DevEnvironment) {
		env.Status.Components = []v1alpha1.ComponentStatus{{Name: "chart", Release: &v1alpha1.ReleaseStatus{Name: "chart", Namespace: nsA, Revision: 1}}}
	})
	user := "ui-carol-" + nsA
	create(t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "dev"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"devenvironments"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"events", "configmaps", "pods", "pods/log"}, Verbs: []string{"get", "list", "watch"}},
	}}, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "dev"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "dev"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}})

	d := startDashboard(t, testOptions(), "--as", user, "-n", nsA)
	for _, ns := range []string{nsA, nsB} {
		name := map[string]string{nsA: "mine", nsB: "theirs"}[ns]
		code, out := d.post(t, "/api/component", `{"namespace":"`+ns+`","env":"`+name+`","component":"web","action":"rebuild","requestId":"r-`+ns+`"}`, nil)
		if !strings.Contains(out, "forbidden") {
			t.Errorf("rebuild of %s/%s as %s: %d %s, want refused as forbidden", ns, name, user, code, out)
		}
		env := &v1alpha1.DevEnvironment{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, env); err != nil {
			t.Fatal(err)
		}
		if v, ok := env.Annotations[v1alpha1.ReconcileRequestAnnotation]; ok {
			t.Errorf("%s/%s got a reconcile request %q from a user who may not patch it", ns, name, v)
		}
	}

	var values struct{ From, Note string }
	d.getJSON(t, "/api/values?"+query("namespace", nsA, "env", "mine", "component", "chart"), &values)
	if values.From != "spec" || !strings.Contains(values.Note, "forbidden") || !strings.Contains(values.Note, "spec.components[2].helm.values") {
		t.Errorf("values as %s, who may not read Secrets: %+v; want the spec's, saying the release was forbidden", user, values)
	}

	logs := d.readEvents(t, "/api/logs?"+query("namespace", nsB, "env", "theirs", "kind", "all"), func(e sse) bool { return e.event == "end" })
	if end := logs[len(logs)-1].data; !strings.Contains(end, "forbidden") {
		t.Errorf("the combined log of namespace B as %s: %s, want forbidden", user, end)
	}
}
