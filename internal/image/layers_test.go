package image

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/testfiles"
)

// tarEntry is what a test checks of one tar header.
type tarEntry struct {
	Name     string
	Type     byte
	Mode     int64
	Linkname string
	Content  string
}

// readLayer lists the entries of l's tar and checks the fields every entry
// must have for a reproducible layer.
func readLayer(t *testing.T, l testfiles.Layer) []tarEntry {
	t.Helper()
	g := NewWithT(t)
	var out []tarEntry
	for _, hdr := range testfiles.LayerEntries(t, l) {
		g.Expect(hdr.ModTime.Unix()).To(BeZero(), hdr.Name)
		g.Expect(hdr.Uid).To(BeZero(), hdr.Name)
		g.Expect(hdr.Gid).To(BeZero(), hdr.Name)
		g.Expect(hdr.Uname).To(BeEmpty(), hdr.Name)
		g.Expect(hdr.Gname).To(BeEmpty(), hdr.Name)
		out = append(out, tarEntry{Name: hdr.Name, Type: hdr.Typeflag, Mode: hdr.Mode, Linkname: hdr.Linkname, Content: hdr.Content})
	}
	return out
}

func TestLayerContent(t *testing.T) {
	dir := testfiles.Tree(t, map[string]string{
		"out/manager":        "binary",
		"config/b.yaml":      "b",
		"config/a.yaml":      "a",
		"config/sub/c.yaml":  "c",
		"config/z/.keep":     "",
		"scripts/run.sh":     "#!/bin/sh",
		"scripts/lib/env.sh": "x=1",
	})
	if err := os.Symlink("a.yaml", filepath.Join(dir, "config/link.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "scripts/run.sh"), 0o750); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		mapping v1alpha1.LayerMapping
		want    []tarEntry
	}{{
		name:    "file with mode, parents included",
		mapping: v1alpha1.LayerMapping{From: "out/manager", To: "/usr/local/bin/manager", Mode: "0755"},
		want: []tarEntry{
			{Name: "usr/", Type: tar.TypeDir, Mode: 0o755},
			{Name: "usr/local/", Type: tar.TypeDir, Mode: 0o755},
			{Name: "usr/local/bin/", Type: tar.TypeDir, Mode: 0o755},
			{Name: "usr/local/bin/manager", Type: tar.TypeReg, Mode: 0o755, Content: "binary"},
		},
	}, {
		name:    "file into a directory keeps its name",
		mapping: v1alpha1.LayerMapping{From: "out/manager", To: "/app/"},
		want: []tarEntry{
			{Name: "app/", Type: tar.TypeDir, Mode: 0o755},
			{Name: "app/manager", Type: tar.TypeReg, Mode: 0o644, Content: "binary"},
		},
	}, {
		name:    "directory in name order, symlinks kept",
		mapping: v1alpha1.LayerMapping{From: "config", To: "/etc/app"},
		want: []tarEntry{
			{Name: "etc/", Type: tar.TypeDir, Mode: 0o755},
			{Name: "etc/app/", Type: tar.TypeDir, Mode: 0o755},
			{Name: "etc/app/a.yaml", Type: tar.TypeReg, Mode: 0o644, Content: "a"},
			{Name: "etc/app/b.yaml", Type: tar.TypeReg, Mode: 0o644, Content: "b"},
			{Name: "etc/app/link.yaml", Type: tar.TypeSymlink, Mode: 0o777, Linkname: "a.yaml"},
			{Name: "etc/app/sub/", Type: tar.TypeDir, Mode: 0o755},
			{Name: "etc/app/sub/c.yaml", Type: tar.TypeReg, Mode: 0o644, Content: "c"},
			{Name: "etc/app/z/", Type: tar.TypeDir, Mode: 0o755},
			{Name: "etc/app/z/.keep", Type: tar.TypeReg, Mode: 0o644},
		},
	}, {
		name:    "directory mode applies to files only",
		mapping: v1alpha1.LayerMapping{From: "scripts", To: "/opt/scripts", Mode: "555"},
		want: []tarEntry{
			{Name: "opt/", Type: tar.TypeDir, Mode: 0o755},
			{Name: "opt/scripts/", Type: tar.TypeDir, Mode: 0o755},
			{Name: "opt/scripts/lib/", Type: tar.TypeDir, Mode: 0o755},
			{Name: "opt/scripts/lib/env.sh", Type: tar.TypeReg, Mode: 0o555, Content: "x=1"},
			{Name: "opt/scripts/run.sh", Type: tar.TypeReg, Mode: 0o555, Content: "#!/bin/sh"},
		},
	}, {
		name:    "source mode kept without a mapping mode",
		mapping: v1alpha1.LayerMapping{From: "scripts/run.sh", To: "/run.sh"},
		want: []tarEntry{
			{Name: "run.sh", Type: tar.TypeReg, Mode: 0o750, Content: "#!/bin/sh"},
		},
	}, {
		name:    "directory at the root",
		mapping: v1alpha1.LayerMapping{From: "scripts/lib", To: "/"},
		want: []tarEntry{
			{Name: "env.sh", Type: tar.TypeReg, Mode: 0o644, Content: "x=1"},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			b, err := NewBuilder(Registry{Prefix: "example.com/team"})
			g.Expect(err).NotTo(HaveOccurred())
			layers, err := b.sourceLayers(Spec{Name: "app", Layers: []v1alpha1.LayerMapping{tc.mapping}}, dir)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(readLayer(t, layers[0])).To(Equal(tc.want))
		})
	}
}

func TestLayerSourceErrorsArePermanent(t *testing.T) {
	dir := testfiles.Tree(t, map[string]string{"a": "a"})
	outside := testfiles.Tree(t, map[string]string{"secret": "token"})
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "escape")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		mapping v1alpha1.LayerMapping
		want    []string
	}{
		{"missing path", v1alpha1.LayerMapping{From: "out/manager", To: "/manager"}, []string{"image app", `"out/manager"`, "does not exist"}},
		{"leaves the source", v1alpha1.LayerMapping{From: "../x", To: "/x"}, []string{"image app", `"../x"`}},
		{"symlink out of the source", v1alpha1.LayerMapping{From: "escape", To: "/x"}, []string{"image app", `"escape"`}},
		{"bad mode", v1alpha1.LayerMapping{From: "a", To: "/a", Mode: "0999"}, []string{"image app", `"0999"`}},
		{"relative to", v1alpha1.LayerMapping{From: "a", To: "a"}, []string{"image app", `"a"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			b, err := NewBuilder(Registry{Prefix: "example.com/team"})
			g.Expect(err).NotTo(HaveOccurred())
			_, err = b.sourceLayers(Spec{Name: "app", Layers: []v1alpha1.LayerMapping{tc.mapping}}, dir)
			g.Expect(err).To(HaveOccurred())
			g.Expect(fault.IsPermanent(err)).To(BeTrue(), err.Error())
			for _, w := range tc.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
			g.Expect(err.Error()).NotTo(ContainSubstring("token"))
		})
	}
}

// TestReproducible builds the same tree from two copies whose files differ
// in modification times and owners, with two separate builders (no shared
// state): the digests must be equal.
func TestReproducible(t *testing.T) {
	g := NewWithT(t)
	files := map[string]string{
		"bin/app":        string(randomBytes(1, 64<<10)),
		"web/index.html": "<html/>",
		"web/css/a.css":  "a{}",
	}
	img := Spec{
		Name:       "app",
		Layers:     []v1alpha1.LayerMapping{{From: "bin/app", To: "/app", Mode: "0755"}, {From: "web", To: "/srv/web"}},
		Entrypoint: []string{"/app"},
		Env:        []v1alpha1.EnvVar{{Name: "MODE", Value: "dev"}},
		Revision:   "abc",
	}
	digestOf := func(dir string) string {
		b, err := NewBuilder(Registry{Prefix: "example.com/team"})
		g.Expect(err).NotTo(HaveOccurred())
		im, err := b.Assemble(context.Background(), img, "linux/amd64", dir)
		g.Expect(err).NotTo(HaveOccurred())
		d, err := im.Digest()
		g.Expect(err).NotTo(HaveOccurred())
		return d.String()
	}

	first := testfiles.Tree(t, files)
	second := testfiles.Tree(t, files)
	past := time.Date(2001, 2, 3, 4, 5, 6, 7, time.UTC)
	err := filepath.WalkDir(second, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if os.Geteuid() == 0 {
			if err := os.Lchown(p, 1234, 5678); err != nil {
				return err
			}
		}
		return os.Chtimes(p, past, past)
	})
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(digestOf(first)).To(Equal(digestOf(second)))

	// And the content matters: one byte more is another image.
	testfiles.WriteFile(t, second, "web/index.html", "<html/>\n")
	g.Expect(digestOf(first)).NotTo(Equal(digestOf(second)))
}

// TestKnownLayerIsRecompressedIdentically checks the shortcut of a layer
// whose tar was compressed before: it is hashed, not compressed, and when
// its blob is needed after all, compressing again gives the digest.
func TestKnownLayerIsRecompressedIdentically(t *testing.T) {
	g := NewWithT(t)
	dir := testfiles.Tree(t, map[string]string{"bin/app": string(randomBytes(2, 256<<10))})
	b, err := NewBuilder(Registry{Prefix: "example.com/team"})
	g.Expect(err).NotTo(HaveOccurred())
	img := Spec{Name: "app", Layers: []v1alpha1.LayerMapping{{From: "bin/app", To: "/app"}}}

	first, err := b.sourceLayers(img, dir)
	g.Expect(err).NotTo(HaveOccurred())
	second, err := b.sourceLayers(img, dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first[0].(*sourceLayer).compressed).NotTo(BeNil())
	g.Expect(second[0].(*sourceLayer).compressed).To(BeNil(), "known layer compressed again")

	for _, l := range []*sourceLayer{first[0].(*sourceLayer), second[0].(*sourceLayer)} {
		rc, err := l.Compressed()
		g.Expect(err).NotTo(HaveOccurred())
		h := sha256.New()
		n, err := io.Copy(h, rc)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rc.Close()).To(Succeed())
		g.Expect("sha256:" + hex.EncodeToString(h.Sum(nil))).To(Equal(l.blob.digest.String()))
		g.Expect(n).To(Equal(l.blob.size))
	}
}

// TestLayerSourceChangedAfterPlanning: a file rewritten between planning
// and reading (a compiler still writing) fails the layer instead of giving
// a blob and a diff ID of different content.
func TestLayerSourceChangedAfterPlanning(t *testing.T) {
	g := NewWithT(t)
	dir := testfiles.Tree(t, map[string]string{"app": "v1"})
	root, err := os.OpenRoot(dir)
	g.Expect(err).NotTo(HaveOccurred())
	defer root.Close()
	plan, err := planMapping(root, "app", v1alpha1.LayerMapping{From: "app", To: "/app"}, false)
	g.Expect(err).NotTo(HaveOccurred())
	entries := plan.entries
	g.Expect(writeLayerTar(io.Discard, dir, entries)).To(Succeed())

	later := time.Now().Add(time.Hour)
	g.Expect(os.WriteFile(filepath.Join(dir, "app"), []byte("v2"), 0o644)).To(Succeed())
	g.Expect(os.Chtimes(filepath.Join(dir, "app"), later, later)).To(Succeed())
	err = writeLayerTar(io.Discard, dir, entries)
	g.Expect(err).To(MatchError(ContainSubstring("changed while the layer was written")))

	g.Expect(os.WriteFile(filepath.Join(dir, "app"), []byte("v2 longer"), 0o644)).To(Succeed())
	err = writeLayerTar(io.Discard, dir, entries)
	g.Expect(err).To(MatchError(ContainSubstring("changed while the layer was written")))
}
