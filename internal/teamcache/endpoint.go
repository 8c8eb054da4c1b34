package teamcache

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// managedBy marks the EndpointSlice LeaderEndpoint writes: the
// EndpointSlice controller leaves slices of other managers alone.
const managedBy = "devloop-manager"

// LeaderEndpoint points the build cache's Service at the leader: the store
// is on the leader's disk and only the leader serves it (Listener), so a
// Service selecting every replica would send some builders to a standby's
// closed port. The Service has no selector; the leader writes its one
// EndpointSlice with its own pod address when it is elected, and a new
// leader overwrites it. It runs on the leader only.
type LeaderEndpoint struct {
	Client kubernetes.Interface
	// Service is the selectorless Service builder pods dial.
	Service types.NamespacedName
	// PodIP is this replica's address; Port the port Listener serves.
	PodIP string
	Port  int32
	// PodName names the endpoint's pod (optional).
	PodName string
}

// NeedLeaderElection is true: the endpoint is the leader's.
func (e LeaderEndpoint) NeedLeaderElection() bool { return true }

func (e LeaderEndpoint) sliceName() string { return e.Service.Name + "-leader" }

// Start writes the EndpointSlice, then, when leadership ends (ctx done),
// removes it if it still names this replica, so builders do not dial a
// pod that is going away while no other leader has written its own.
func (e LeaderEndpoint) Start(ctx context.Context) error {
	if e.PodIP == "" {
		return fmt.Errorf("the build cache's Service %s needs this pod's address (POD_IP)", e.Service)
	}
	if err := e.write(ctx); err != nil {
		return fmt.Errorf("pointing the build cache's Service %s at this pod: %w", e.Service, err)
	}
	<-ctx.Done()
	stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return e.release(stop)
}

// write creates or overwrites the slice with this replica's address.
func (e LeaderEndpoint) write(ctx context.Context) error {
	slices := e.Client.DiscoveryV1().EndpointSlices(e.Service.Namespace)
	want := e.slice()
	for {
		cur, err := slices.Get(ctx, want.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = slices.Create(ctx, want, metav1.CreateOptions{})
		} else if err == nil {
			want.ResourceVersion = cur.ResourceVersion
			_, err = slices.Update(ctx, want, metav1.UpdateOptions{})
		}
		// A conflict is a write by another (old) leader in between: read again.
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// release deletes the slice when it still names this replica (a newer
// leader's slice stays).
func (e LeaderEndpoint) release(ctx context.Context) error {
	slices := e.Client.DiscoveryV1().EndpointSlices(e.Service.Namespace)
	cur, err := slices.Get(ctx, e.sliceName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(cur.Endpoints) != 1 || len(cur.Endpoints[0].Addresses) != 1 || cur.Endpoints[0].Addresses[0] != e.PodIP {
		return nil
	}
	err = slices.Delete(ctx, cur.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &cur.ResourceVersion}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

func (e LeaderEndpoint) slice() *discoveryv1.EndpointSlice {
	ep := discoveryv1.Endpoint{
		Addresses:  []string{e.PodIP},
		Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
	}
	if e.PodName != "" {
		ep.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: e.Service.Namespace, Name: e.PodName}
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:      e.sliceName(),
			Namespace: e.Service.Namespace,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: e.Service.Name,
				discoveryv1.LabelManagedBy:   managedBy,
			},
		},
		AddressType: addressType(e.PodIP),
		Endpoints:   []discoveryv1.Endpoint{ep},
		Ports: []discoveryv1.EndpointPort{{
			Name: ptr.To("build-cache"), Port: ptr.To(e.Port), Protocol: ptr.To(corev1.ProtocolTCP),
		}},
	}
}

func addressType(ip string) discoveryv1.AddressType {
	if a, err := netip.ParseAddr(ip); err == nil && a.Is6() && !a.Is4In6() {
		return discoveryv1.AddressTypeIPv6
	}
	return discoveryv1.AddressTypeIPv4
}
