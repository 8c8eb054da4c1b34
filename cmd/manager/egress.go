package main

import (
	"context"
	"flag"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/internal/egress"
)

// listFlag is a flag given several times or as a comma list.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// egressFlags are the flags of the egress policy applied to every
// connection the operator makes for a tenant (git, OCI and chart
// registries, chart repositories, Flux artifacts, spec.registry.prefix).
// Helper pods need none: they run in the tenant's network.
type egressFlags struct {
	denyCIDRs, allowCIDRs, denyHosts, allowHosts listFlag
	// cluster: deny the cluster's own ranges, discovered at start.
	cluster bool
}

func registerEgressFlags(fs *flag.FlagSet) *egressFlags {
	e := &egressFlags{}
	fs.Var(&e.denyCIDRs, "egress-deny-cidr", "address range (CIDR) the operator never connects to for a tenant, in addition to link-local and cloud metadata addresses; give the cluster's Service and Pod ranges (repeatable, comma lists)")
	fs.Var(&e.allowCIDRs, "egress-allow-cidr", "address range allowed inside a denied one; the most specific range wins (repeatable, comma lists)")
	fs.Var(&e.denyHosts, "egress-deny-host", "host[:port] never connected to, '*.' prefix for subdomains (repeatable, comma lists)")
	fs.BoolVar(&e.cluster, "egress-deny-cluster", true, "also refuse the cluster's own ranges, read at start: its Service ranges (ServiceCIDRs), Pod ranges (nodes' podCIDRs, widened to /16) and the operator's own ports (its pod address, loopback in a pod); allowed hosts stay reachable")
	fs.Var(&e.allowHosts, "egress-allow-host", "host[:port] connected to whatever it resolves to, such as the in-cluster registry's Service; '*.' prefix for subdomains (repeatable, comma lists)")
	return e
}

func (e *egressFlags) policy() (*egress.Policy, error) {
	return egress.New(egress.Config{DenyCIDRs: e.denyCIDRs, AllowCIDRs: e.allowCIDRs, DenyHosts: e.denyHosts, AllowHosts: e.allowHosts})
}

// denyCluster adds the cluster's own ranges to policy (egress.ClusterDenies),
// read once as the operator starts; the notes say what was guessed.
func denyCluster(r client.Reader, policy *egress.Policy, log logr.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rules, notes := egress.ClusterDenies(ctx, r, egress.ClusterEnv{
		ServiceHost: os.Getenv("KUBERNETES_SERVICE_HOST"), PodIP: os.Getenv("POD_IP")})
	policy.Deny = append(policy.Deny, rules...)
	for _, n := range notes {
		log.Info("egress: "+n, "hint", "give the range with --egress-deny-cidr")
	}
	denied := make([]string, 0, len(rules))
	for _, r := range rules {
		denied = append(denied, r.Prefix.String())
	}
	log.Info("egress: the cluster's own ranges are refused", "cidrs", denied)
}
