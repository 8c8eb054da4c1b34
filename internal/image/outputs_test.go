package image

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/internal/testfiles"
	"github.com/devloop-dev/devloop/internal/testregistry"
)

// crdsOutput is the output the tests pack.
var crdsOutput = OutputSpec{Name: "crds", Path: "config/crd/bases", Field: "spec.components[1].images[0].run.outputs[0]"}

const crdYAML = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
`

// TestOutputIsAnArtifactTheSourceFetcherReads: an output pushed by the
// builder is fetched back by the source engine's OCI fetch unchanged (the
// format kubectl devloop push writes), files, modes and links inside it
// included, and nothing outside its directory.
func TestOutputIsAnArtifactTheSourceFetcherReads(t *testing.T) {
	g := NewWithT(t)
	host := testregistry.Start(t)
	ctx := context.Background()
	b, _ := testBuilder(t, host)
	dir := testfiles.Tree(t, map[string]string{
		"config/crd/bases/widgets.yaml":    crdYAML,
		"config/crd/bases/sub/gadgets.sh":  "#!/bin/sh\n",
		"config/crd/kustomization.yaml":    "resources: [bases/widgets.yaml]\n",
		"config/rbac/role.yaml":            "kind: Role\n",
		"config/crd/bases/.hidden-too.txt": "kept\n",
	})
	g.Expect(os.Chmod(filepath.Join(dir, "config/crd/bases/sub/gadgets.sh"), 0o755)).To(Succeed())
	g.Expect(os.Symlink("widgets.yaml", filepath.Join(dir, "config/crd/bases/latest.yaml"))).To(Succeed())

	reports, err := b.PushOutputs(ctx, "operator", dir, []OutputSpec{crdsOutput})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reports).To(HaveLen(1))
	g.Expect(reports[0].Name).To(Equal("crds"))
	g.Expect(reports[0].Digest).To(HavePrefix("sha256:"))

	repo := host + "/team/operator/outputs/crds"
	g.Expect(b.Repository(OutputRepository("operator", "crds"))).To(Equal(repo))
	f := &source.Fetcher{Root: t.TempDir()}
	a, err := f.Fetch(ctx, source.Ref{Source: "crds", Kind: source.KindOCI, URL: repo, Digest: reports[0].Digest, Insecure: true}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	got := map[string]string{}
	g.Expect(filepath.WalkDir(a.Dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(a.Dir, p)
		if d.Type()&os.ModeSymlink != 0 {
			link, err := os.Readlink(p)
			got[rel] = "-> " + link
			return err
		}
		data, err := os.ReadFile(p)
		got[rel] = string(data)
		return err
	})).To(Succeed())
	g.Expect(got).To(Equal(map[string]string{
		"widgets.yaml":    crdYAML,
		"sub/gadgets.sh":  "#!/bin/sh\n",
		".hidden-too.txt": "kept\n",
		"latest.yaml":     "-> widgets.yaml",
	}))
	info, err := os.Stat(filepath.Join(a.Dir, "sub/gadgets.sh"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Mode().Perm()&0o100).NotTo(BeZero(), "an executable stays executable")

	// The operator tags it with the image's content tag, once.
	g.Expect(b.TagOutput(ctx, "operator", "crds", reports[0].Digest, "c0ffee")).To(Succeed())
	g.Expect(tagDigest(t, host, "team/operator/outputs/crds", "c0ffee")).To(Equal(reports[0].Digest))
	held, err := b.HoldsOutput(ctx, "operator", "crds", reports[0].Digest, "c0ffee")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(held).To(BeTrue())
	held, err = b.HoldsOutput(ctx, "operator", "crds", reports[0].Digest, "other")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(held).To(BeFalse(), "a tag that names nothing is not held")
}

// TestOutputDigestDependsOnlyOnContent: the same files written at other
// times, in another order, give the same digest (nothing redeploys); a
// changed byte or mode gives another.
func TestOutputDigestDependsOnlyOnContent(t *testing.T) {
	g := NewWithT(t)
	host := testregistry.Start(t)
	ctx := context.Background()
	b, _ := testBuilder(t, host)
	push := func(dir string) string {
		t.Helper()
		reports, err := b.PushOutputs(ctx, "operator", dir, []OutputSpec{crdsOutput})
		g.Expect(err).NotTo(HaveOccurred())
		return reports[0].Digest
	}

	first := testfiles.Tree(t, map[string]string{"config/crd/bases/a.yaml": crdYAML, "config/crd/bases/b/c.yaml": "c: 1\n"})
	second := t.TempDir()
	testfiles.WriteFile(t, second, "config/crd/bases/b/c.yaml", "c: 1\n")
	testfiles.WriteFile(t, second, "config/crd/bases/a.yaml", crdYAML)
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	g.Expect(os.Chtimes(filepath.Join(second, "config/crd/bases/a.yaml"), old, old)).To(Succeed())
	g.Expect(os.Chtimes(filepath.Join(second, "config/crd/bases/b"), old, old)).To(Succeed())

	d1 := push(first)
	g.Expect(push(first)).To(Equal(d1), "the same output pushed twice")
	g.Expect(push(second)).To(Equal(d1), "other times and write order")

	testfiles.WriteFile(t, second, "config/crd/bases/a.yaml", crdYAML+"# changed\n")
	changed := push(second)
	g.Expect(changed).NotTo(Equal(d1))
	g.Expect(os.Chmod(filepath.Join(second, "config/crd/bases/a.yaml"), 0o600)).To(Succeed())
	g.Expect(push(second)).NotTo(Equal(changed), "the mode is content")
}

// TestOutputThatCannotBePackedNamesItsField: a missing directory, a file
// where a directory is declared, a link leaving the output (or the
// workspace), and a pipe each fail naming the output's field and path,
// before anything is pushed.
func TestOutputThatCannotBePackedNamesItsField(t *testing.T) {
	host := testregistry.Start(t)
	b, rt := testBuilder(t, host)
	secret := filepath.Join(t.TempDir(), "credentials")
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  []string
	}{
		{"missing directory", func(t *testing.T, dir string) { testfiles.WriteFile(t, dir, "config/other.yaml", "x") },
			[]string{"directory config/crd/bases does not exist in the workspace after the run step"}},
		{"a file, not a directory", func(t *testing.T, dir string) { testfiles.WriteFile(t, dir, "config/crd/bases", "x") },
			[]string{"config/crd/bases is not a directory"}},
		{"a link out of the output", func(t *testing.T, dir string) {
			testfiles.WriteFile(t, dir, "config/crd/bases/a.yaml", crdYAML)
			testfiles.WriteFile(t, dir, "config/rbac/role.yaml", "kind: Role\n")
			if err := os.Symlink("../../rbac/role.yaml", filepath.Join(dir, "config/crd/bases/role.yaml")); err != nil {
				t.Fatal(err)
			}
		}, []string{"config/crd/bases/role.yaml is a symbolic link to ../../rbac/role.yaml, outside the output directory config/crd/bases"}},
		{"an absolute link", func(t *testing.T, dir string) {
			testfiles.WriteFile(t, dir, "config/crd/bases/a.yaml", crdYAML)
			if err := os.Symlink(secret, filepath.Join(dir, "config/crd/bases/creds")); err != nil {
				t.Fatal(err)
			}
		}, []string{"config/crd/bases/creds is a symbolic link to " + secret}},
		{"the output itself links out of the workspace", func(t *testing.T, dir string) {
			if err := os.MkdirAll(filepath.Join(dir, "config/crd"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Dir(secret), filepath.Join(dir, "config/crd/bases")); err != nil {
				t.Fatal(err)
			}
		}, []string{"config/crd/bases", "not a link out of it"}},
		{"a pipe", func(t *testing.T, dir string) {
			testfiles.WriteFile(t, dir, "config/crd/bases/a.yaml", crdYAML)
			if err := syscall.Mkfifo(filepath.Join(dir, "config/crd/bases/pipe"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, []string{"config/crd/bases/pipe is neither a file, a directory nor a symbolic link"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			if err := os.WriteFile(secret, []byte("{}"), 0o600); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			tc.setup(t, dir)
			rt.take()
			_, err := b.PushOutputs(context.Background(), "operator", dir, []OutputSpec{crdsOutput})
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(HavePrefix(crdsOutput.Field + ": "))
			for _, w := range tc.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
			g.Expect(writes(rt.take())).To(BeEmpty(), "nothing is pushed")
		})
	}
}

// TestOutputOverTheLimitIsRefused: an output is packed in memory, so its
// size is bounded while it is copied.
func TestOutputOverTheLimitIsRefused(t *testing.T) {
	g := NewWithT(t)
	defer func(l int64) { outputLimit = l }(outputLimit)
	outputLimit = 64 << 10
	dir := testfiles.Tree(t, map[string]string{"out/small": "x", "out/big": string(randomBytes(1, 61<<10))})
	g.Expect(copyOutput(dir, OutputSpec{Name: "out", Path: "out", Field: "f"}, t.TempDir())).To(Succeed(), "61 KiB and two entries fit")
	testfiles.WriteFile(t, dir, "out/big", string(randomBytes(1, 64<<10)))
	err := copyOutput(dir, OutputSpec{Name: "out", Path: "out", Field: "f"}, t.TempDir())
	g.Expect(err).To(MatchError(ContainSubstring("f: out holds more than 64 KiB")))
}
