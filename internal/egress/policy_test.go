package egress

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func mustNew(t *testing.T, c Config) *Policy {
	t.Helper()
	p, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// expectRefused checks which addresses p refuses to dial (address ->
// refused).
func expectRefused(t *testing.T, p *Policy, refused map[string]bool) {
	t.Helper()
	for addr, want := range refused {
		err := p.Check("h:443", netip.MustParseAddr(addr))
		if (err != nil) != want {
			t.Errorf("%s: err %v, want refused=%v", addr, err, want)
		}
	}
}

func TestDefaultDeniesLinkLocalOnly(t *testing.T) {
	p := Default()
	expectRefused(t, p, map[string]bool{
		"169.254.169.254":        true,
		"169.254.0.1":            true,
		"::ffff:169.254.169.254": true, // IPv4-mapped IPv6
		"fe80::1":                true,
		"fe80::1%eth0":           true,
		"fd00:ec2::254":          true,
		"64:ff9b::a9fe:a9fe":     true, // NAT64 of 169.254.169.254
		"2002:a9fe:a9fe::1":      true, // 6to4
		"64:ff9b::808:808":       false,
		"127.0.0.1":              false, // loopback: a laptop's local registry
		"::1":                    false,
		"10.96.0.1":              false, // cluster ranges only when configured
		"192.168.1.10":           false,
		"8.8.8.8":                false,
		"2001:db8::1":            false,
	})
	err := p.Check("metadata.example:80", netip.MustParseAddr("169.254.169.254"))
	var re *RefusedError
	if !errors.As(err, &re) || err.Error() != "egress policy refuses 169.254.169.254 (link-local) for metadata.example:80" {
		t.Errorf("message %q", err)
	}
}

func TestNilPolicyAllowsEverything(t *testing.T) {
	var p *Policy
	if err := p.Check("h:1", netip.MustParseAddr("169.254.169.254")); err != nil {
		t.Error(err)
	}
}

func TestCIDRsMostSpecificWins(t *testing.T) {
	p := mustNew(t, Config{
		DenyCIDRs:  []string{"10.0.0.0/8", "127.0.0.0/8", "::1", "::ffff:192.168.0.0/112"},
		AllowCIDRs: []string{"10.1.0.0/16", "169.254.10.0/24"},
	})
	expectRefused(t, p, map[string]bool{
		"10.2.3.4":           true,
		"10.1.2.3":           false, // the allowed /16 is more specific than the denied /8
		"::ffff:10.2.3.4":    true,
		"::ffff:10.1.2.3":    false,
		"127.0.0.1":          true,
		"::1":                true,
		"169.254.10.7":       false, // allowed explicitly inside link-local
		"169.254.169.254":    true,
		"192.168.4.4":        true, // mapped range given in IPv6 form
		"::ffff:192.168.4.4": true,
		"11.0.0.1":           false,
	})
	err := p.Check("h:443", netip.MustParseAddr("10.9.9.9"))
	if err == nil || !strings.Contains(err.Error(), "(--egress-deny-cidr 10.0.0.0/8)") {
		t.Errorf("message %v should name the flag and range", err)
	}
	// A tie goes to deny.
	tie := mustNew(t, Config{DenyCIDRs: []string{"10.0.0.0/8"}, AllowCIDRs: []string{"10.0.0.0/8"}})
	if tie.Check("h:1", netip.MustParseAddr("10.0.0.1")) == nil {
		t.Error("a tie between allow and deny must deny")
	}
}

func TestHostPatterns(t *testing.T) {
	p := mustNew(t, Config{
		DenyCIDRs:  []string{"10.96.0.0/12"},
		AllowHosts: []string{"registry.devloop-system.svc:5000", "*.cache.svc.cluster.local", "10.96.7.7"},
		DenyHosts:  []string{"*.internal", "Forbidden.Example."},
	})
	svc := netip.MustParseAddr("10.96.0.10")
	cases := []struct {
		host    string
		refused bool
	}{
		{"registry.devloop-system.svc:5000", false}, // the in-cluster registry
		{"REGISTRY.devloop-system.svc.:5000", false},
		{"registry.devloop-system.svc:5001", true}, // another port
		{"other.devloop-system.svc:5000", true},
		{"a.cache.svc.cluster.local:443", false},
		{"b.a.cache.svc.cluster.local:80", false},
		{"cache.svc.cluster.local:80", true}, // "*." needs a subdomain
		{"10.96.7.7:443", false},
		{"[::ffff:10.96.7.7]:443", false},
	}
	for _, c := range cases {
		err := p.Check(c.host, svc)
		if (err != nil) != c.refused {
			t.Errorf("%s: err %v, want refused=%v", c.host, err, c.refused)
		}
	}
	// Denied names are refused whatever they resolve to.
	for _, h := range []string{"metadata.google.internal:80", "forbidden.example:443"} {
		err := p.Check(h, netip.MustParseAddr("8.8.8.8"))
		if err == nil || !strings.Contains(err.Error(), "--egress-deny-host") {
			t.Errorf("%s: err %v, want a refusal naming --egress-deny-host", h, err)
		}
	}
	// An allowed host still cannot escape link-local by name only when
	// allowed explicitly: the operator said so.
	if err := p.Check("registry.devloop-system.svc:5000", netip.MustParseAddr("169.254.1.1")); err != nil {
		t.Errorf("an allowed host is dialled whatever it resolves to: %v", err)
	}
}

func TestNewRefusesInvalidInput(t *testing.T) {
	for _, c := range []Config{
		{DenyCIDRs: []string{"10.0.0.0/33"}},
		{DenyCIDRs: []string{"nope"}},
		{AllowCIDRs: []string{"1.2.3"}},
		{AllowHosts: []string{"*"}},
		{AllowHosts: []string{"a.*.b"}},
		{AllowHosts: []string{"host:99999"}},
		{DenyHosts: []string{""}},
	} {
		if _, err := New(c); err == nil || !strings.Contains(err.Error(), "--egress-") {
			t.Errorf("%+v: err %v, want one naming the flag", c, err)
		}
	}
}
