package image

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/devloop-dev/devloop/internal/fault"
)

// TestPlainHTTPOnlyWhenInsecure runs against a plain-HTTP registry on
// 127.0.0.1, where go-containerregistry would fall back to HTTP on its own.
func TestPlainHTTPOnlyWhenInsecure(t *testing.T) {
	host := startRegistry(t, nil)
	img := Spec{Name: "app", Entrypoint: []string{"/app"}}

	t.Run("refused without insecure", func(t *testing.T) {
		g := NewWithT(t)
		rt := &recordingTransport{}
		b, err := NewBuilder(Registry{Prefix: host + "/team"}, WithTransport(rt), fastRetries())
		g.Expect(err).NotTo(HaveOccurred())

		_, err = b.Build(context.Background(), img, "", nil)
		g.Expect(err).To(HaveOccurred())
		var plain *PlainHTTPError
		g.Expect(errors.As(err, &plain)).To(BeTrue(), err.Error())
		g.Expect(fault.IsPermanent(err)).To(BeTrue())
		g.Expect(err.Error()).To(ContainSubstring("refusing plain HTTP to registry " + host))
		g.Expect(err.Error()).To(ContainSubstring("insecure"))
		reqs := rt.take()
		g.Expect(reqs).NotTo(BeEmpty())
		for _, r := range reqs {
			g.Expect(r.Scheme).To(Equal("https"), "a plain HTTP request left the process: %v", r)
		}

		_, err = b.ResolveBase(context.Background(), host+"/base/static:latest", false)
		g.Expect(errors.As(err, &plain)).To(BeTrue(), "%v", err)
	})

	t.Run("allowed with insecure", func(t *testing.T) {
		g := NewWithT(t)
		b, rt := testBuilder(t, host)
		res, err := b.Build(context.Background(), img, "", nil)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Pushed).To(BeTrue())
		var plain bool
		for _, r := range rt.take() {
			plain = plain || r.Scheme == "http"
		}
		g.Expect(plain).To(BeTrue())
	})

	t.Run("insecure covers only the environment's registry", func(t *testing.T) {
		g := NewWithT(t)
		other := startRegistry(t, nil)
		pushBase(t, other, "base/static", "linux/amd64")
		b, _ := testBuilder(t, host)
		_, err := b.Build(context.Background(), Spec{Name: "app", Base: other + "/base/static:latest"}, "", nil)
		var plain *PlainHTTPError
		g.Expect(errors.As(err, &plain)).To(BeTrue(), "%v", err)
		g.Expect(plain.Host).To(Equal(other))
		g.Expect(err.Error()).To(ContainSubstring("image app"))
		g.Expect(err.Error()).To(ContainSubstring("baseInsecure"), "the message says how to allow it")

		// Resolving names no image: the message has no empty one.
		_, err = b.ResolveBase(context.Background(), other+"/base/static:latest", false)
		g.Expect(err.Error()).To(HavePrefix("base image " + other))

		// baseInsecure marks the base's registry plain HTTP.
		_, err = b.ResolveBase(context.Background(), other+"/base/static:latest", true)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = b.Build(context.Background(), Spec{Name: "app", Base: other + "/base/static:latest", BaseInsecure: true}, "", nil)
		g.Expect(err).NotTo(HaveOccurred())
	})
}
