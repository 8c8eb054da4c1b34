package egress

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// forbidden is a reader without the right to list anything.
type forbidden struct{ client.Reader }

func (forbidden) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("forbidden")
}

// TestClusterDeniesGuessWhatTheyCannotRead: without ServiceCIDRs or node
// podCIDRs to read, the /16 around the kubernetes Service and around the
// operator's pod are refused, and the notes say so. Outside a pod
// (no $KUBERNETES_SERVICE_HOST) loopback stays allowed, for a laptop.
func TestClusterDeniesGuessWhatTheyCannotRead(t *testing.T) {
	rules, notes := ClusterDenies(context.Background(), forbidden{}, ClusterEnv{ServiceHost: "10.43.0.1", PodIP: "10.42.3.9"})
	p := &Policy{Deny: rules}
	for _, ip := range []string{"10.43.200.1", "10.42.0.5", "127.0.0.1"} {
		if p.CheckAddr("x:80", netip.MustParseAddr(ip)) == nil {
			t.Errorf("%s must be refused", ip)
		}
	}
	if err := p.CheckAddr("x:80", netip.MustParseAddr("10.44.0.1")); err != nil {
		t.Errorf("10.44.0.1 is in neither range: %v", err)
	}
	if len(notes) != 4 || !strings.Contains(strings.Join(notes, "\n"), "around the kubernetes Service") {
		t.Errorf("notes %q, want the two failed reads and the two guesses", notes)
	}

	rules, _ = ClusterDenies(context.Background(), forbidden{}, ClusterEnv{})
	if len(rules) != 0 {
		t.Errorf("outside a pod with nothing readable: %v, want no rule", rules)
	}
}
