package image

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/devloop-dev/devloop/internal/egress"
	"github.com/devloop-dev/devloop/internal/fault"
)

// The operator gives the engine the egress policy's transport
// (cmd/manager): spec.registry.prefix and base images on a denied address
// are refused, permanently, before the registry receives a request.
func TestRegistryBehindEgressPolicy(t *testing.T) {
	g := NewWithT(t)
	var hits atomic.Int64
	host := startRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1); h.ServeHTTP(w, r) })
	})
	p, err := egress.New(egress.Config{DenyCIDRs: []string{"127.0.0.0/8"}})
	g.Expect(err).NotTo(HaveOccurred())
	b, err := NewBuilder(Registry{Prefix: host + "/team", Insecure: true}, WithTransport(p.Transport()), fastRetries())
	g.Expect(err).NotTo(HaveOccurred())

	_, err = b.Build(context.Background(), Spec{Name: "app", Entrypoint: []string{"/app"}}, "", nil)
	g.Expect(err).To(MatchError(ContainSubstring("egress policy refuses 127.0.0.1 (--egress-deny-cidr 127.0.0.0/8)")))
	g.Expect(fault.IsPermanent(err)).To(BeTrue(), "%v", err)
	_, err = b.ResolveBase(context.Background(), host+"/base/static:latest", true)
	g.Expect(err).To(MatchError(ContainSubstring("egress policy refuses 127.0.0.1")))
	g.Expect(hits.Load()).To(BeZero())

	// The in-cluster registry, allowed by name, is reached.
	p, err = egress.New(egress.Config{DenyCIDRs: []string{"127.0.0.0/8"}, AllowHosts: []string{host}})
	g.Expect(err).NotTo(HaveOccurred())
	b, err = NewBuilder(Registry{Prefix: host + "/team", Insecure: true}, WithTransport(p.Transport()), fastRetries())
	g.Expect(err).NotTo(HaveOccurred())
	_, err = b.Build(context.Background(), Spec{Name: "app", Entrypoint: []string{"/app"}}, "", nil)
	g.Expect(err).NotTo(HaveOccurred())
}
