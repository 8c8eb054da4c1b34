package cli

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/test/browser"
)

// A component that declares no ports still offers its workload's Service
// ports: the Service whose selector picks web's pods is listed with a
// Port-forward button, one click starts the forward and shows its URL; a
// Service in front of other pods is not listed.
func TestUIEndpointsFromAWorkloadsServicePorts(t *testing.T) {
	bctx := browser.Start(t)
	ns := testenv.Namespace(t, k8s, "ui-endpoints")
	createEnv(t, ns, "team", teamSpec())
	one := int32(1)
	create(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: appsv1.DeploymentSpec{Replicas: &one,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web"}}}}}},
		pod(ns, "web-1", map[string]string{"app": "web"}, "web"),
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "other"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 9090}}}})
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		env.Status.Components = []v1alpha1.ComponentStatus{{Name: "web", Phase: v1alpha1.PhaseReady,
			Inventory: []v1alpha1.ObjectRef{{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: ns, Name: "web"}}}}
	})
	base, url := launchDashboard(t, testOptions(), "-n", ns)
	browser.Navigate(t, bctx, url)
	browser.WaitJS(t, bctx, "the list", `document.querySelector('tr[data-env]')`)
	browser.Navigate(t, bctx, base+"/#/env/"+ns+"/team/components/web")
	browser.WaitJS(t, bctx, "svc/web:8080 offered", `document.querySelector('[data-port="web/svc/web:8080"] [data-forward="start"]')`)
	if other := browser.EvalString(t, bctx, `String(!!document.querySelector('[data-port="web/svc/other:9090"]'))`); other != "false" {
		t.Errorf("a Service in front of other pods is offered for web")
	}
	browser.Click(t, bctx, `[data-port="web/svc/web:8080"] [data-forward="start"]`)
	browser.WaitJS(t, bctx, "the forward's URL", `(document.querySelector('[data-port="web/svc/web:8080"] a[data-url]') || {}).textContent?.startsWith('http://127.0.0.1:')`)
	browser.Click(t, bctx, `[data-port="web/svc/web:8080"] [data-forward="stop"]`)
	browser.WaitJS(t, bctx, "the forward stopped", `document.querySelector('[data-port="web/svc/web:8080"] [data-forward="start"]')`)
}
