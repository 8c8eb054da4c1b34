package main

import (
	"net/netip"
	"strings"
	"testing"
)

func TestEgressFlags(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	// The default: link-local refused, loopback (a laptop's registry) and
	// private ranges allowed.
	if o.egress.Check("h:80", netip.MustParseAddr("169.254.169.254")) == nil {
		t.Error("the default policy must refuse link-local")
	}
	if err := o.egress.Check("localhost:5000", netip.MustParseAddr("127.0.0.1")); err != nil {
		t.Errorf("the default policy must allow loopback: %v", err)
	}
	o, err = parseFlags([]string{"--egress-deny-cidr=10.96.0.0/12,10.244.0.0/16", "--egress-deny-cidr", "127.0.0.0/8",
		"--egress-allow-host=devloop-registry.devloop-system.svc:5000", "--egress-allow-cidr=10.96.0.10/32", "--egress-deny-host=*.internal"})
	if err != nil {
		t.Fatal(err)
	}
	svc := netip.MustParseAddr("10.96.3.4")
	for host, ip := range map[string]netip.Addr{"git.example:443": svc, "x:1": netip.MustParseAddr("10.244.1.1"), "y:1": netip.MustParseAddr("127.0.0.1")} {
		if o.egress.Check(host, ip) == nil {
			t.Errorf("%s at %s must be refused", host, ip)
		}
	}
	if err := o.egress.Check("devloop-registry.devloop-system.svc:5000", svc); err != nil {
		t.Errorf("the in-cluster registry must be allowed: %v", err)
	}
	if err := o.egress.Check("dns:53", netip.MustParseAddr("10.96.0.10")); err != nil {
		t.Errorf("an allowed /32 inside a denied range: %v", err)
	}
	if o.egress.Check("metadata.google.internal:80", netip.MustParseAddr("8.8.8.8")) == nil {
		t.Error("a denied host must be refused")
	}
	if _, err := parseFlags([]string{"--egress-deny-cidr=10.0.0.0/40"}); err == nil || !strings.Contains(err.Error(), "--egress-deny-cidr") {
		t.Errorf("err %v, want one naming the flag", err)
	}
}
