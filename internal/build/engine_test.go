package build

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/image"
	"github.com/devloop-dev/devloop/internal/source"
)

// TestNewRevisionOfTheSameFilesIsTheSameImage: every push is a new source
// revision; a build whose files did not change must give the same digest,
// so nothing rolls out. The revision stays out of the image config.
func TestNewRevisionOfTheSameFilesIsTheSameImage(t *testing.T) {
	g := NewWithT(t)
	// Assembling on scratch reads no registry: the host is only a name.
	const host = "registry.invalid"
	b, err := image.NewBuilder(image.Registry{Prefix: host + "/team"})
	g.Expect(err).NotTo(HaveOccurred())
	dir := t.TempDir()
	g.Expect(os.MkdirAll(filepath.Join(dir, "bin"), 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "bin", "manager"), []byte("same binary"), 0o644)).To(Succeed())
	img := &v1alpha1.ImageSpec{Name: "manager", Layers: []v1alpha1.LayerMapping{{From: "bin/manager", To: "/manager"}}}

	var digests []string
	for _, rev := range []string{"1111111111111111111111111111111111111111111111111111111111111111", "2222222222222222222222222222222222222222222222222222222222222222"} {
		ref := source.Ref{Source: "src", Kind: source.KindOCI, URL: host + "/team/src", ID: rev, Digest: "sha256:" + rev}
		assembled, err := b.Assemble(context.Background(), imageSpec(img, ref, ""), "", dir)
		g.Expect(err).NotTo(HaveOccurred())
		d, err := assembled.Digest()
		g.Expect(err).NotTo(HaveOccurred())
		cf, err := assembled.ConfigFile()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cf.Config.Labels).To(HaveKeyWithValue("org.opencontainers.image.source", host+"/team/src"))
		digests = append(digests, d.String())
	}
	g.Expect(digests[1]).To(Equal(digests[0]), "a new revision of the same files")
}
