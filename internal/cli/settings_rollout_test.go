package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testfiles"
	"github.com/devloop-dev/devloop/internal/testregistry"
	"github.com/devloop-dev/devloop/test/builder"
)

// greeterChart is a chart whose one ConfigMap shows the value greeting.
var greeterChart = map[string]string{
	"chart/Chart.yaml":            "apiVersion: v2\nname: greeter\nversion: 0.1.0\n",
	"chart/values.yaml":           "greeting: chart-default\n",
	"chart/templates/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-greeting\ndata:\n  greeting: {{ .Values.greeting | quote }}\n",
}

// With the real operator: an environment whose valuesFrom names a
// settings ConfigMap with optional: true is Ready before anyone wrote it
// (the chart's default is deployed); `settings` then writes it, asks the
// environment to reconcile, and the release is upgraded with the value.
// The operator does not watch ConfigMaps, so without that request the
// change would wait for a reconcile for another reason.
func TestSettingsReachTheRelease(t *testing.T) {
	host := testregistry.Start(t)
	ns := operatorNamespace(t)
	name := uniqueName("greeter")
	settingsName := name + "-settings"
	createEnv(t, ns, name, builder.Env("", "").ServiceAccount("deployer").
		// An hour between source checks: only the reconcile that settings
		// asks for can bring the value in within the test's minute.
		OCI("app", host+"/"+name+"-src").Interval("app", time.Hour).
		Components(builder.Component("greeter", builder.Chart("chart", builder.ReleaseName(name),
			builder.ValuesFrom(v1alpha1.ValuesReference{Kind: "ConfigMap", Name: settingsName, Optional: true})))).Spec())
	dir := testfiles.Tree(t, greeterChart)

	r := plugin(t, "push", dir, "--env", name, "--source", "app", "-n", ns)
	if r.code != 0 || !strings.Contains(r.out, "Ready in") {
		t.Fatalf("push with the optional settings missing:\n%s", r)
	}
	greeting := func() string {
		cm := &corev1.ConfigMap{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name + "-greeting"}, cm); err != nil {
			t.Fatal(err)
		}
		return cm.Data["greeting"]
	}
	if g := greeting(); g != "chart-default" {
		t.Fatalf("greeting %q before any settings, want the chart's default", g)
	}
	expectKstatus(t, getEnv(t, ns, name), status.CurrentStatus)

	t.Setenv("DEVLOOP_TEST_GREETING", "hello from my shell")
	r = plugin(t, "settings", name, settingsName, "--set-env", "greeting=DEVLOOP_TEST_GREETING", "-n", ns)
	if r.code != 0 || !strings.Contains(r.out, "asked devenvironment/"+name+" to reconcile") || r.err != "" {
		t.Fatalf("settings:\n%s", r)
	}
	waitUntil(t, "the release to carry the setting", func() bool { return greeting() == "hello from my shell" })
	waitUntil(t, "the environment to be Ready again", func() bool {
		env := getEnv(t, ns, name)
		return ready(env) && env.Status.LastHandledReconcileAt == env.Annotations[v1alpha1.ReconcileRequestAnnotation]
	})
}
