package main

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestEgressDeniesTheClusterRanges: with no --egress-deny-cidr at all,
// the operator, reading as the chart's ClusterRole, refuses the cluster's
// Service range (a ServiceCIDR), its Pod range (a node's podCIDR, widened
// to /16), its own pod and loopback ports, while the chart's registry,
// whatever range it is in, and the outside stay reachable.
func TestEgressDeniesTheClusterRanges(t *testing.T) {
	admin, operatorConfig := apiServer(t)
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "egress-node"}, Spec: corev1.NodeSpec{PodCIDRs: []string{"10.244.1.0/24"}}}
	services := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "egress-services"}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.97.0.0/16"}}}
	for _, obj := range []client.Object{node, services} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.Delete(context.Background(), obj) })
	}
	operator, err := client.New(operatorConfig, client.Options{Scheme: newScheme()})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.97.0.1")
	t.Setenv("POD_IP", "10.244.1.7")
	o, err := parseFlags([]string{"--egress-allow-host=devloop-registry.devloop-system.svc:5000"})
	if err != nil {
		t.Fatal(err)
	}
	if !o.egressCluster {
		t.Fatal("--egress-deny-cluster is off by default")
	}
	denyCluster(operator, o.egress, logr.Discard())

	for _, c := range []struct{ host, ip, why string }{
		{"svc.team-a.svc:80", "10.97.3.4", "ServiceCIDR egress-services"},
		{"pod:8080", "10.244.200.1", "podCIDR of node egress-node"},
		{"manager:8081", "10.244.1.7", "the operator's own pod address"},
		{"localhost:8080", "127.0.0.1", "loopback"},
		{"localhost:8080", "::1", "loopback"},
	} {
		err := o.egress.Check(c.host, netip.MustParseAddr(c.ip))
		if err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s at %s: %v, want a refusal naming %q", c.host, c.ip, err, c.why)
		} else {
			t.Logf("%s at %s: %v", c.host, c.ip, err)
		}
	}
	for host, ip := range map[string]string{"devloop-registry.devloop-system.svc:5000": "10.97.0.50", "git.example:443": "140.82.112.3", "registry.lan:5000": "10.250.0.1"} {
		if err := o.egress.Check(host, netip.MustParseAddr(ip)); err != nil {
			t.Errorf("%s at %s must stay reachable: %v", host, ip, err)
		}
	}
}
