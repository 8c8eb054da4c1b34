package teamcache

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/internal/testenv"
)

// With two replicas the build cache's Service reaches the leader only: a
// leader points it at its own pod, a newer leader takes it over, an old
// leader leaving does not remove the newer one's address, and the last
// leader leaving removes its own. Done as the operator, with the Role the
// chart and config/default grant it in the release namespace.
func TestLeaderEndpointFollowsTheLeader(t *testing.T) {
	ctx := context.Background()
	ns := operatorNamespaceWithBuildCacheRole(t, ctx)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "devloop-build-cache", Namespace: ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "build-cache", Port: 5003}}},
	}
	if err := admin.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	replica := func(ip, pod string) LeaderEndpoint {
		return LeaderEndpoint{Client: operatorSet, Service: types.NamespacedName{Namespace: ns, Name: svc.Name}, PodIP: ip, PodName: pod, Port: 5003}
	}
	first := startLeader(t, replica("10.244.0.7", "manager-a"))
	waitForLeaderAddress(t, ns, "10.244.0.7", first)

	// A new leader (the first one cut off, its lease lost) takes the Service.
	second := startLeader(t, replica("10.244.1.9", "manager-b"))
	waitForLeaderAddress(t, ns, "10.244.1.9", second)

	// The old leader leaves last: the new leader's address stays.
	if err := first.stop(); err != nil {
		t.Fatalf("the first leader stopping: %v", err)
	}
	if got := leaderAddresses(t, ns); len(got) != 1 || got[0] != "10.244.1.9" {
		t.Fatalf("after the old leader left the Service's endpoints are %v, want only the new leader 10.244.1.9", got)
	}
	// The last leader leaving removes its address (no builder dials a pod going away).
	if err := second.stop(); err != nil {
		t.Fatalf("the second leader stopping: %v", err)
	}
	if got := leaderAddresses(t, ns); got != nil {
		t.Fatalf("after the last leader left the Service's endpoints are %v, want none", got)
	}
}

// The slice's labels tie it to the Service (kube-proxy and CoreDNS read
// slices by kubernetes.io/service-name) and keep the EndpointSlice
// controller off it; its port is the Service's port by name.
func TestLeaderEndpointSliceServesTheServicePort(t *testing.T) {
	e := LeaderEndpoint{Service: types.NamespacedName{Namespace: "ns", Name: "devloop-build-cache"}, PodIP: "fd00::5", Port: 5003}
	s := e.slice()
	if s.Labels[discoveryv1.LabelServiceName] != "devloop-build-cache" || s.Labels[discoveryv1.LabelManagedBy] == "endpointslice-controller.k8s.io" {
		t.Errorf("labels %v", s.Labels)
	}
	if s.AddressType != discoveryv1.AddressTypeIPv6 {
		t.Errorf("address type %s for fd00::5, want IPv6", s.AddressType)
	}
	if p := s.Ports[0]; *p.Name != "build-cache" || *p.Port != 5003 {
		t.Errorf("port %s/%d, want build-cache/5003", *p.Name, *p.Port)
	}
}

type runningLeader struct {
	cancel context.CancelFunc
	done   chan error
}

func startLeader(t *testing.T, e LeaderEndpoint) *runningLeader {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningLeader{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- e.Start(ctx) }()
	t.Cleanup(func() { _ = r.stop() })
	return r
}

// stop ends the leadership and waits for Start to return.
func (r *runningLeader) stop() error {
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- nil // a second stop returns at once
		return err
	case <-time.After(time.Minute):
		return context.DeadlineExceeded
	}
}

func leaderAddresses(t *testing.T, ns string) []string {
	t.Helper()
	s := &discoveryv1.EndpointSlice{}
	err := admin.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "devloop-build-cache-leader"}, s)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var ips []string
	for _, ep := range s.Endpoints {
		ips = append(ips, ep.Addresses...)
	}
	return ips
}

// waitForLeaderAddress waits until the Service's endpoints are only ip,
// written by leader, which must not have stopped.
func waitForLeaderAddress(t *testing.T, ns, ip string, leader *runningLeader) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		got := leaderAddresses(t, ns)
		if len(got) == 1 && got[0] == ip {
			return
		}
		select {
		case err := <-leader.done:
			t.Fatalf("the leader at %s stopped: %v", ip, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the build cache Service's endpoints are %v, want only %s", got, ip)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// operatorNamespaceWithBuildCacheRole is a fresh namespace standing for
// the release namespace, with config/rbac's build cache Role bound to the
// operator's ServiceAccount user.
func operatorNamespaceWithBuildCacheRole(t *testing.T, ctx context.Context) string {
	t.Helper()
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "cache-leader-"}}
	if err := admin.Create(ctx, nsObj); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "build_cache_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{}
	if err := yaml.Unmarshal(data, role); err != nil {
		t.Fatal(err)
	}
	role.ObjectMeta = metav1.ObjectMeta{Name: "build-cache", Namespace: nsObj.Name}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "build-cache", Namespace: nsObj.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: testenv.OperatorNamespace, Name: testenv.OperatorServiceAccount}},
	}
	if err := admin.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	if err := admin.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	return nsObj.Name
}
