package install

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// registry.nodeProxy: every node gets the registry at localhost:<hostPort>
// through a DaemonSet relaying to the registry's Service, and the registry
// pod binds no host port (two binds of one port on its node would leave
// one pod unscheduled).
func TestChartRegistryNodeProxy(t *testing.T) {
	for _, auth := range []bool{true, false} {
		vals := everything()
		reg := vals["registry"].(map[string]any)
		reg["hostPort"] = 30600
		reg["nodeProxy"] = map[string]any{"enabled": true}
		reg["auth"] = map[string]any{"enabled": auth}
		objs := renderChart(t, vals)

		var ds appsv1.DaemonSet
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(find(t, objs, "DaemonSet", "devloop-registry-node-proxy").Object, &ds); err != nil {
			t.Fatal(err)
		}
		c := ds.Spec.Template.Spec.Containers[0]
		if p := c.Ports[0]; p.HostPort != 30600 || p.ContainerPort != 5000 {
			t.Errorf("auth %v: relay port %+v, want host port 30600 to container port 5000", auth, p)
		}
		if got := strings.Join(c.Args, " "); got != "registry-node-proxy --listen=:5000 --registry=devloop-registry."+namespace+".svc:5000" {
			t.Errorf("auth %v: relay args %q", auth, got)
		}
		wantProbe := map[bool]string{true: "/devloop-front/healthz", false: "/v2/"}[auth]
		if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != wantProbe {
			t.Errorf("auth %v: readiness %+v, want GET %s through the relay", auth, p, wantProbe)
		}
		if tol := ds.Spec.Template.Spec.Tolerations; len(tol) != 1 || tol[0].Operator != "Exists" || tol[0].Key != "" {
			t.Errorf("auth %v: tolerations %+v, want every taint tolerated", auth, tol)
		}
		if ds.Spec.Template.Spec.AutomountServiceAccountToken == nil || *ds.Spec.Template.Spec.AutomountServiceAccountToken {
			t.Errorf("auth %v: the relay mounts an API token; it talks to no API", auth)
		}
		// The registry's Service must never select a relay.
		for k, v := range ds.Spec.Template.Labels {
			if k == "app.kubernetes.io/component" && v == "registry" {
				t.Errorf("auth %v: relay pods carry the registry's component label: its Service would route to them", auth)
			}
		}
		d := deploymentOf(t, objs, "devloop-registry")
		for _, rc := range d.Spec.Template.Spec.Containers {
			for _, p := range rc.Ports {
				if p.HostPort != 0 {
					t.Errorf("auth %v: registry container %s binds host port %d beside the node proxy", auth, rc.Name, p.HostPort)
				}
			}
		}
	}

	// Without a hostPort there is nothing for the relay to bind: refused,
	// naming both fields.
	vals := everything()
	vals["registry"].(map[string]any)["nodeProxy"] = map[string]any{"enabled": true}
	if _, err := tryRenderChart(vals); err == nil || !strings.Contains(err.Error(), "registry.nodeProxy.enabled") || !strings.Contains(err.Error(), "registry.hostPort") {
		t.Errorf("nodeProxy without hostPort: %v, want an error naming registry.nodeProxy.enabled and registry.hostPort", err)
	}
	// Off by default.
	for _, o := range renderChart(t, everything()) {
		if o.GetKind() == "DaemonSet" {
			t.Errorf("DaemonSet %s rendered with registry.nodeProxy off", o.GetName())
		}
	}
}
