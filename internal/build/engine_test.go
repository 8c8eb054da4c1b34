package build

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/source"
)

// TestNewRevisionOfTheSameFilesIsTheSameImage: every push is a new source
// revision; a build whose files did not change must give the same digest,
// so nothing rolls out. The revision stays out of the image config.
func TestNewRevisionOfTheSameFilesIsTheSameImage(t *testing.T) {
	g := NewWithT(t)
	host := startRegistry(t, nil)
	b, _ := testBuilder(t, host)
	dir := writeTree(t, map[string]string{"bin/manager": "same binary"})
	img := &v1alpha1.ImageSpec{Name: "manager", Layers: []v1alpha1.LayerMapping{{From: "bin/manager", To: "/manager"}}}

	var digests []string
	for _, rev := range []string{"1111111111111111111111111111111111111111111111111111111111111111", "2222222222222222222222222222222222222222222222222222222222222222"} {
		ref := source.Ref{Source: "src", Kind: source.KindOCI, URL: host + "/team/src", ID: rev, Digest: "sha256:" + rev}
		image, err := b.Assemble(context.Background(), imageSpec(img, ref, ""), "", dir)
		g.Expect(err).NotTo(HaveOccurred())
		d, err := image.Digest()
		g.Expect(err).NotTo(HaveOccurred())
		cf, err := image.ConfigFile()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cf.Config.Labels).To(HaveKeyWithValue("org.opencontainers.image.source", host+"/team/src"))
		digests = append(digests, d.String())
	}
	g.Expect(digests[1]).To(Equal(digests[0]), "a new revision of the same files")
}
