package image

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/liveupdate"
	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/internal/testfiles"
)

// staticBinary builds a tiny static Go program to stand in for the
// operator's binary (the test binary itself may be dynamically linked).
func staticBinary(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\nfunc main() { println(\"supervisor\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-o", "supervisor", "main.go")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOFLAGS=", "GO111MODULE=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	return filepath.Join(dir, "supervisor")
}

// fsEntry is a file of an image's flattened filesystem.
type fsEntry struct {
	typeflag byte
	mode     int64
	linkname string
	content  []byte
}

// readTar reads every entry of a tar stream by name.
func readTar(t *testing.T, r io.Reader) map[string]fsEntry {
	t.Helper()
	out := map[string]fsEntry{}
	for _, e := range testfiles.ReadTar(t, r) {
		out[e.Name] = fsEntry{typeflag: e.Typeflag, mode: e.Mode, linkname: e.Linkname, content: []byte(e.Content)}
	}
	return out
}

// A live-updatable scratch image gets the supervisor (the binary given,
// 0755, a static ELF) in a top layer, its live paths as links into the
// live root and their files under /.devloop/orig; two builds differing in
// the program only are a live update for the operator's decision.
func TestLiveUpdateImageHasTheSupervisorLayer(t *testing.T) {
	supervisor := staticBinary(t)
	for _, compression := range []source.Compression{source.CompressionNone, source.CompressionGzip} {
		t.Run(string(compression), func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			host := startRegistry(t, nil)
			b, err := NewBuilder(Registry{Prefix: host + "/team", Insecure: true, Compression: compression}, fastRetries(), WithSupervisor(supervisor))
			g.Expect(err).NotTo(HaveOccurred())

			dir := t.TempDir()
			g.Expect(os.MkdirAll(filepath.Join(dir, "out"), 0o755)).To(Succeed())
			g.Expect(os.MkdirAll(filepath.Join(dir, "static", "css"), 0o755)).To(Succeed())
			g.Expect(os.WriteFile(filepath.Join(dir, "out", "server"), []byte("server v1"), 0o755)).To(Succeed())
			g.Expect(os.WriteFile(filepath.Join(dir, "static", "index.html"), []byte("<h1>one</h1>"), 0o644)).To(Succeed())
			g.Expect(os.WriteFile(filepath.Join(dir, "static", "css", "site.css"), []byte("body{}"), 0o644)).To(Succeed())
			g.Expect(os.WriteFile(filepath.Join(dir, "config.yaml"), []byte("a: b"), 0o644)).To(Succeed())
			img := Spec{Name: "web", Entrypoint: []string{"/server"},
				Layers: []v1alpha1.LayerMapping{
					{From: "out/server", To: "/server", Mode: "0755"},
					{From: "static", To: "/srv/static"},
					{From: "config.yaml", To: "/etc/web/config.yaml"},
				},
				LivePaths: []string{"/server", "/srv/static", "/opt/from-the-base"}}
			first, err := b.Build(ctx, img, dir, nil)
			g.Expect(err).NotTo(HaveOccurred())

			ref, _ := name.NewDigest(first.Repository+"@"+first.Digest, name.Insecure)
			image, err := remote.Image(ref)
			g.Expect(err).NotTo(HaveOccurred())
			layers, err := image.Layers()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(layers).To(HaveLen(4))
			rc, err := layers[3].Uncompressed()
			g.Expect(err).NotTo(HaveOccurred())
			top := readTar(t, rc)
			rc.Close()

			sup := top[".devloop/supervisor"]
			g.Expect(sup.typeflag).To(Equal(byte(tar.TypeReg)))
			g.Expect(sup.mode).To(Equal(int64(0o755)))
			g.Expect(sup.content).To(Equal(mustReadFile(t, supervisor)))
			exe, err := elf.NewFile(bytes.NewReader(sup.content))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(exe.Machine).To(Equal(elf.EM_X86_64))
			for _, p := range exe.Progs {
				g.Expect(p.Type).NotTo(Equal(elf.PT_INTERP), "the supervisor must be static")
			}
			g.Expect(top[".devloop/live/"].mode).To(Equal(int64(0o777)))
			g.Expect(top["server"]).To(Equal(fsEntry{typeflag: tar.TypeSymlink, mode: 0o777, linkname: "/.devloop/live/server", content: []byte{}}))
			g.Expect(top["srv/static"].linkname).To(Equal("/.devloop/live/srv/static"))
			g.Expect(top).NotTo(HaveKey("opt/from-the-base"), "a live path no layer writes is not linked")

			// The flattened image: the program and assets are links, their
			// files under /.devloop/orig, the rest where it was.
			flat := readTar(t, mutate.Extract(image))
			g.Expect(flat["server"].typeflag).To(Equal(byte(tar.TypeSymlink)))
			g.Expect(flat[".devloop/orig/server"].content).To(Equal([]byte("server v1")))
			g.Expect(flat[".devloop/orig/server"].mode).To(Equal(int64(0o755)))
			g.Expect(flat[".devloop/orig/srv/static/index.html"].content).To(Equal([]byte("<h1>one</h1>")))
			g.Expect(flat[".devloop/orig/srv/static/css/site.css"].content).To(Equal([]byte("body{}")))
			g.Expect(flat["etc/web/config.yaml"].content).To(Equal([]byte("a: b")))
			g.Expect(flat).NotTo(HaveKey("srv/static/index.html"))

			// A new program only: the operator's decision is a live update
			// of /server, whose tar carries the new file.
			g.Expect(os.WriteFile(filepath.Join(dir, "out", "server"), []byte("server v2"), 0o755)).To(Succeed())
			second, err := b.Build(ctx, img, dir, nil)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(second.Digest).NotTo(Equal(first.Digest))
			next, err := remote.Image(mustDigest(t, second.Repository+"@"+second.Digest))
			g.Expect(err).NotTo(HaveOccurred())
			d, err := liveupdate.Decide(image, next, img.LivePaths)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Live).To(BeTrue(), d.Reason)
			g.Expect(d.Files).To(HaveLen(1))
			g.Expect(d.Files[0].Path).To(Equal("/server"))
			var sync bytes.Buffer
			g.Expect(liveupdate.WriteTar(&sync, next, d.Files, 1<<20)).To(Succeed())
			g.Expect(readTar(t, &sync)).To(HaveKeyWithValue("/server", fsEntry{typeflag: tar.TypeReg, mode: 0o755, content: []byte("server v2")}))
		})
	}
}

// A supervisor built for another platform is refused naming
// images[].platforms, a binary that is not ELF too.
func TestLiveUpdateLayerRefusesAnotherPlatform(t *testing.T) {
	g := NewWithT(t)
	supervisor := staticBinary(t)
	_, err := LiveUpdateLayer("web", supervisor, v1.Platform{OS: "linux", Architecture: "arm64"}, nil, false)
	g.Expect(err).To(MatchError(ContainSubstring("image web: liveUpdate: no supervisor for linux/arm64: the operator image has none in /supervisors and its own binary is built for linux/amd64; list in images[].platforms only platforms")))

	notELF := filepath.Join(t.TempDir(), "script")
	g.Expect(os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755)).To(Succeed())
	_, err = LiveUpdateLayer("web", notELF, v1.Platform{OS: "linux", Architecture: "amd64"}, nil, false)
	g.Expect(err).To(MatchError(ContainSubstring("is not an ELF executable")))

	// Through a build: nothing is pushed.
	host := startRegistry(t, nil)
	b, err := NewBuilder(Registry{Prefix: host + "/team", Insecure: true}, WithSupervisor(supervisor))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = b.Build(context.Background(), Spec{Name: "web", Platforms: []string{"linux/arm64"}, LivePaths: []string{"/x"}}, "", nil)
	g.Expect(err).To(MatchError(ContainSubstring("images[].platforms")))
}

func mustReadFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustDigest(t *testing.T, ref string) name.Digest {
	t.Helper()
	d, err := name.NewDigest(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The supervisor of an image is the operator image's small one for the
// image's platform when it ships one, else the running binary.
func TestSupervisorForPicksThePlatformsBinary(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	for _, n := range []string{"supervisor-linux-amd64", "supervisor-linux-arm64", "supervisor-linux-arm-v7"} {
		g.Expect(os.WriteFile(filepath.Join(dir, n), []byte(n), 0o755)).To(Succeed())
	}
	exe, err := os.Executable()
	g.Expect(err).NotTo(HaveOccurred())
	for _, c := range []struct {
		p    v1.Platform
		want string
	}{
		{v1.Platform{OS: "linux", Architecture: "amd64"}, filepath.Join(dir, "supervisor-linux-amd64")},
		{v1.Platform{OS: "linux", Architecture: "arm64"}, filepath.Join(dir, "supervisor-linux-arm64")},
		{v1.Platform{OS: "linux", Architecture: "arm", Variant: "v7"}, filepath.Join(dir, "supervisor-linux-arm-v7")},
		{v1.Platform{OS: "linux", Architecture: "s390x"}, exe},
	} {
		got, err := SupervisorFor(dir, c.p)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(c.want), c.p.String())
	}
	got, err := SupervisorFor("", v1.Platform{OS: "linux", Architecture: "amd64"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(exe))
}
