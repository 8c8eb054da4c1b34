package egress

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Where the operator runs, as its pod sees it.
type ClusterEnv struct {
	// ServiceHost is $KUBERNETES_SERVICE_HOST, the kubernetes Service's
	// address, which the kubelet gives every pod: empty outside a pod.
	ServiceHost string
	// PodIP is the operator pod's own address ($POD_IP, from the
	// downward API), empty when not given.
	PodIP string
}

// ClusterDenies are the cluster's own ranges, which a tenant must not
// reach through the operator: the Service ranges (ServiceCIDR objects),
// the Pod ranges (the nodes' podCIDRs) and the operator's own ports (its
// pod address and, in a pod, loopback). What cannot be read is guessed
// from the addresses the pod knows: the /16 (IPv4; /112 for IPv6)
// holding the kubernetes Service, the one holding the pod's address.
// Each guess and each failed read is returned as a note, for the log.
// Allowed hosts (the chart's registry) stay reachable whatever range they
// are in: host patterns are decided before addresses.
func ClusterDenies(ctx context.Context, r client.Reader, env ClusterEnv) (rules []Rule, notes []string) {
	podIP, podErr := netip.ParseAddr(env.PodIP)
	if env.ServiceHost != "" {
		rules = append(rules,
			Rule{netip.MustParsePrefix("127.0.0.0/8"), "loopback: the operator's own ports"},
			Rule{netip.MustParsePrefix("::1/128"), "loopback: the operator's own ports"})
	}
	if podErr == nil {
		rules = append(rules, Rule{netip.PrefixFrom(podIP.Unmap(), podIP.Unmap().BitLen()), "the operator's own pod address"})
	}

	services, err := serviceRanges(ctx, r)
	if err != nil {
		notes = append(notes, fmt.Sprintf("listing ServiceCIDRs: %v", err))
	}
	if len(services) == 0 {
		if a, err := netip.ParseAddr(env.ServiceHost); err == nil {
			services = append(services, Rule{around(a), "the cluster's Service range (guessed around the kubernetes Service " + a.String() + ")"})
			notes = append(notes, "no ServiceCIDR read: denying "+services[0].Prefix.String()+" around the kubernetes Service")
		}
	}
	rules = append(rules, services...)

	pods, err := podRanges(ctx, r)
	if err != nil {
		notes = append(notes, fmt.Sprintf("listing nodes: %v", err))
	}
	if len(pods) == 0 && podErr == nil {
		pods = append(pods, Rule{around(podIP), "the cluster's Pod range (guessed around the operator's pod address " + podIP.String() + ")"})
		notes = append(notes, "no node podCIDR read: denying "+pods[0].Prefix.String()+" around the operator's pod address")
	}
	return append(rules, pods...), notes
}

// around is the /16 (IPv4) or /112 (IPv6) holding a.
func around(a netip.Addr) netip.Prefix {
	a = a.Unmap().WithZone("")
	bits := 16
	if a.Is6() {
		bits = 112
	}
	return netip.PrefixFrom(a, bits).Masked()
}

// serviceRanges are the CIDRs of the cluster's ServiceCIDR objects.
func serviceRanges(ctx context.Context, r client.Reader) ([]Rule, error) {
	list := &networkingv1.ServiceCIDRList{}
	if err := r.List(ctx, list); err != nil {
		return nil, err
	}
	var rules []Rule
	for _, sc := range list.Items {
		for _, c := range sc.Spec.CIDRs {
			if p, err := parsePrefix(c); err == nil {
				rules = append(rules, Rule{p, "the cluster's Service range (ServiceCIDR " + sc.Name + ")"})
			}
		}
	}
	return rules, nil
}

// podRanges are the nodes' podCIDRs, each IPv4 one widened to its /16:
// a node holds a slice of the cluster's Pod range, and the nodes that
// join later get the slices next to it.
func podRanges(ctx context.Context, r client.Reader) ([]Rule, error) {
	seen := map[netip.Prefix]bool{}
	var rules []Rule
	opts := []client.ListOption{client.Limit(500)}
	for {
		nodes := &corev1.NodeList{}
		if err := r.List(ctx, nodes, opts...); err != nil {
			return rules, err
		}
		for _, n := range nodes.Items {
			for _, c := range n.Spec.PodCIDRs {
				p, err := parsePrefix(c)
				if err != nil {
					continue
				}
				if p.Addr().Is4() && p.Bits() > 16 {
					p = around(p.Addr())
				}
				if !seen[p] {
					seen[p] = true
					rules = append(rules, Rule{p, "the cluster's Pod range (podCIDR of node " + n.Name + ")"})
				}
			}
		}
		if nodes.Continue == "" {
			return rules, nil
		}
		opts = []client.ListOption{client.Limit(500), client.Continue(nodes.Continue)}
	}
}
