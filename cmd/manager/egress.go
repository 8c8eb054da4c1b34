package main

import (
	"flag"
	"strings"

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
}

func registerEgressFlags(fs *flag.FlagSet) *egressFlags {
	e := &egressFlags{}
	fs.Var(&e.denyCIDRs, "egress-deny-cidr", "address range (CIDR) the operator never connects to for a tenant, in addition to link-local and cloud metadata addresses; give the cluster's Service and Pod ranges (repeatable, comma lists)")
	fs.Var(&e.allowCIDRs, "egress-allow-cidr", "address range allowed inside a denied one; the most specific range wins (repeatable, comma lists)")
	fs.Var(&e.denyHosts, "egress-deny-host", "host[:port] never connected to, '*.' prefix for subdomains (repeatable, comma lists)")
	fs.Var(&e.allowHosts, "egress-allow-host", "host[:port] connected to whatever it resolves to, such as the in-cluster registry's Service; '*.' prefix for subdomains (repeatable, comma lists)")
	return e
}

func (e *egressFlags) policy() (*egress.Policy, error) {
	return egress.New(egress.Config{DenyCIDRs: e.denyCIDRs, AllowCIDRs: e.allowCIDRs, DenyHosts: e.denyHosts, AllowHosts: e.allowHosts})
}
