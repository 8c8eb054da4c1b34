// Package egress is the operator's policy for the network connections it
// makes on a tenant's behalf: git servers, OCI registries, chart
// repositories, Flux artifacts and spec.registry.prefix are all dialled
// from the operator's pod, outside the tenants' NetworkPolicies, so a
// DevEnvironment author could otherwise point the operator at the cloud
// metadata endpoint or at services only the operator's network position
// reaches.
//
// The policy is checked when a connection is dialled, on the address the
// name resolved to, for every connection: DNS rebinding and redirects to a
// forbidden address are refused like a forbidden URL. Its default denies
// link-local addresses (169.254.0.0/16, fe80::/10: the cloud metadata
// endpoints) and the AWS IPv6 metadata address; the cluster's own Service
// and Pod ranges and the operator's own ports are denied too, as
// ClusterDenies discovers them at start (--egress-deny-cluster) or as the
// operator is given them (--egress-deny-cidr), and an operator-configured
// host such as the in-cluster registry is allowed whatever it resolves to
// (--egress-allow-host). Outside a pod loopback stays allowed unless
// denied, so a local registry on localhost keeps working for an operator
// run on a laptop.
//
// Helper pods (`manager helper fetch` in builder pods) run in the tenant's
// namespace and network, under its NetworkPolicies: they use no policy.
package egress

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Rule is an address range and why it is in the policy, as shown in a
// refusal ("link-local", "--egress-deny-cidr 10.96.0.0/12").
type Rule struct {
	Prefix netip.Prefix
	Why    string
}

// Policy decides which addresses the operator may connect to. The zero
// value and nil allow everything; Default and New add the default denies.
type Policy struct {
	// Deny and Allow are address ranges. The most specific range that
	// holds an address decides; on a tie, Deny wins. Addresses in no range
	// are allowed.
	Deny, Allow []Rule
	// AllowHosts are host patterns dialled whatever they resolve to (the
	// in-cluster registry); DenyHosts are never dialled. A pattern is a
	// host name or address, optionally with ":port", and may start with
	// "*." to match every subdomain.
	AllowHosts, DenyHosts []string

	transport transportOnce
}

// DefaultDeny is what every policy made by Default or New denies.
var DefaultDeny = []Rule{
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "cloud metadata"},
	// IPv4 link-local embedded in IPv6: NAT64 (RFC 6052) and 6to4.
	{netip.MustParsePrefix("64:ff9b::a9fe:0/112"), "link-local via NAT64"},
	{netip.MustParsePrefix("2002:a9fe::/32"), "link-local via 6to4"},
}

// Default is the policy with the default denies only.
func Default() *Policy {
	return &Policy{Deny: append([]Rule(nil), DefaultDeny...)}
}

// Config is a policy as flags give it.
type Config struct {
	// DenyCIDRs and AllowCIDRs are CIDRs or single addresses.
	DenyCIDRs, AllowCIDRs []string
	// DenyHosts and AllowHosts are host patterns (see Policy).
	DenyHosts, AllowHosts []string
}

// New is Default plus c. An invalid CIDR or pattern is an error naming it.
func New(c Config) (*Policy, error) {
	p := Default()
	for _, s := range c.DenyCIDRs {
		pfx, err := parsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("--egress-deny-cidr %q: %w", s, err)
		}
		p.Deny = append(p.Deny, Rule{pfx, "--egress-deny-cidr " + pfx.String()})
	}
	for _, s := range c.AllowCIDRs {
		pfx, err := parsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("--egress-allow-cidr %q: %w", s, err)
		}
		p.Allow = append(p.Allow, Rule{pfx, "--egress-allow-cidr " + pfx.String()})
	}
	for _, s := range c.DenyHosts {
		if err := checkPattern(s); err != nil {
			return nil, fmt.Errorf("--egress-deny-host %q: %w", s, err)
		}
		p.DenyHosts = append(p.DenyHosts, s)
	}
	for _, s := range c.AllowHosts {
		if err := checkPattern(s); err != nil {
			return nil, fmt.Errorf("--egress-allow-host %q: %w", s, err)
		}
		p.AllowHosts = append(p.AllowHosts, s)
	}
	return p, nil
}

// parsePrefix reads a CIDR or a single address; IPv4-mapped IPv6 ranges
// become IPv4 ones, so each range is compared in one family.
func parsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		a = a.Unmap().WithZone("")
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked(), nil
}

func checkPattern(s string) error {
	host, port := splitPattern(s)
	if body := strings.TrimPrefix(host, "*."); body == "" || strings.ContainsAny(body, "*/ @") {
		return fmt.Errorf("not a host name or address, optionally with :port and a leading \"*.\"")
	}
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return fmt.Errorf("invalid port %q", port)
		}
	}
	return nil
}

// splitPattern splits "host[:port]" (IPv6 addresses in brackets).
func splitPattern(s string) (host, port string) {
	s = strings.ToLower(strings.TrimSpace(s))
	if h, p, err := net.SplitHostPort(s); err == nil {
		return normHost(h), p
	}
	return normHost(s), ""
}

func normHost(h string) string {
	h = strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().WithZone("").String()
	}
	return h
}

// matchHost reports whether host:port (port may be empty) matches one of
// patterns.
func matchHost(patterns []string, host, port string) (string, bool) {
	host = normHost(host)
	for _, pat := range patterns {
		ph, pp := splitPattern(pat)
		if pp != "" && pp != port {
			continue
		}
		if ph == host || (strings.HasPrefix(ph, "*.") && strings.HasSuffix(host, ph[1:])) {
			return pat, true
		}
	}
	return "", false
}

// RefusedError is a connection the policy refused.
type RefusedError struct {
	// Host is the name (or address) the connection was asked for, with
	// its port.
	Host string
	// IP is the address refused; invalid when the host name itself was.
	IP netip.Addr
	// Why names the rule: "link-local", "--egress-deny-cidr 10.96.0.0/12".
	Why string
	// URL is the request's URL, when the refusal was of an HTTP request.
	URL string
}

func (e *RefusedError) Error() string {
	target := e.URL
	if target == "" {
		target = e.Host
	}
	if !e.IP.IsValid() {
		return fmt.Sprintf("egress policy refuses %s (%s) for %s", e.Host, e.Why, target)
	}
	return fmt.Sprintf("egress policy refuses %s (%s) for %s", e.IP, e.Why, target)
}

// CheckHost decides on host:port by name alone: nil when an allowed host
// pattern matches it (its addresses are then not checked), a refusal when
// a denied one does, and ok=false when its addresses decide.
func (p *Policy) CheckHost(hostport string) (allowed bool, err error) {
	if p == nil {
		return true, nil
	}
	host, port, splitErr := net.SplitHostPort(hostport)
	if splitErr != nil {
		host, port = hostport, ""
	}
	if pat, ok := matchHost(p.DenyHosts, host, port); ok {
		return false, &RefusedError{Host: hostport, Why: "--egress-deny-host " + pat}
	}
	if _, ok := matchHost(p.AllowHosts, host, port); ok {
		return true, nil
	}
	return false, nil
}

// CheckAddr decides on one address that hostport resolved to.
func (p *Policy) CheckAddr(hostport string, ip netip.Addr) error {
	if p == nil {
		return nil
	}
	ip = ip.Unmap().WithZone("")
	var best *Rule
	deny := false
	for i := range p.Deny {
		r := &p.Deny[i]
		if r.Prefix.Contains(ip) && (best == nil || r.Prefix.Bits() > best.Prefix.Bits()) {
			best, deny = r, true
		}
	}
	for i := range p.Allow {
		r := &p.Allow[i]
		if r.Prefix.Contains(ip) && (best == nil || r.Prefix.Bits() > best.Prefix.Bits()) {
			best, deny = r, false
		}
	}
	if best != nil && deny {
		return &RefusedError{Host: hostport, IP: ip, Why: best.Why}
	}
	return nil
}

// Check decides on a connection to hostport at ip: host patterns first,
// then the address.
func (p *Policy) Check(hostport string, ip netip.Addr) error {
	allowed, err := p.CheckHost(hostport)
	if err != nil || allowed {
		return err
	}
	return p.CheckAddr(hostport, ip)
}
