package supervisor

import (
	"archive/tar"
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

type tarEntry struct {
	name, body, link string
	typeflag         byte
	mode             int64
}

func tarBytes(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Typeflag: e.typeflag, Mode: e.mode, Size: int64(len(e.body)), Linkname: e.link}
		if e.typeflag != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); e.typeflag == tar.TypeReg && err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The live root seeded from the image's originals serves them through
// links; a sync replaces one file, adds one, deletes one, and leaves the
// other links alone.
func TestSeedThenApplyTar(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	orig, root := filepath.Join(dir, "orig"), filepath.Join(dir, "live")
	g.Expect(os.MkdirAll(filepath.Join(orig, "srv", "static", "css"), 0o755)).To(Succeed())
	g.Expect(os.MkdirAll(root, 0o777)).To(Succeed())
	for name, body := range map[string]string{"server": "v1", "srv/static/index.html": "one", "srv/static/old.js": "old", "srv/static/css/site.css": "css"} {
		g.Expect(os.WriteFile(filepath.Join(orig, name), []byte(body), 0o644)).To(Succeed())
	}

	n, err := seed(root, orig)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(4))
	g.Expect(os.Readlink(filepath.Join(root, "srv/static/index.html"))).To(Equal(filepath.Join(orig, "srv/static/index.html")))
	g.Expect(os.ReadFile(filepath.Join(root, "server"))).To(Equal([]byte("v1")))
	// Seeding again (a container restart before any sync) changes nothing.
	n, err = seed(root, orig)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(0))
	n, err = seed(root, filepath.Join(dir, "no-orig"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(0))

	r, err := os.OpenRoot(root)
	g.Expect(err).NotTo(HaveOccurred())
	defer r.Close()
	changed, err := applyTar(r, bytes.NewReader(tarBytes(t,
		tarEntry{name: "/server", body: "v2", typeflag: tar.TypeReg, mode: 0o755},
		tarEntry{name: "srv/static/index.html", body: "two", typeflag: tar.TypeReg, mode: 0o644},
		tarEntry{name: "/srv/static/new/app.js", body: "new", typeflag: tar.TypeReg, mode: 0o600},
		tarEntry{name: "/srv/static/.wh.old.js", typeflag: tar.TypeReg},
		tarEntry{name: "/srv/static/latest", link: "index.html", typeflag: tar.TypeSymlink},
	)), false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changed).To(Equal([]string{"/server", "/srv/static/index.html", "/srv/static/new/app.js", "/srv/static/old.js", "/srv/static/latest"}))

	st, err := os.Lstat(filepath.Join(root, "server"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Mode()).To(Equal(os.FileMode(0o755)), "a regular file with the tar's mode replaced the link")
	g.Expect(os.ReadFile(filepath.Join(root, "server"))).To(Equal([]byte("v2")))
	g.Expect(os.ReadFile(filepath.Join(orig, "server"))).To(Equal([]byte("v1")), "the original is untouched")
	g.Expect(os.ReadFile(filepath.Join(root, "srv/static/latest"))).To(Equal([]byte("two")))
	g.Expect(filepath.Join(root, "srv/static/old.js")).NotTo(BeAnExistingFile())
	g.Expect(os.Readlink(filepath.Join(root, "srv/static/css/site.css"))).To(Equal(filepath.Join(orig, "srv/static/css/site.css")))
	st, _ = os.Stat(filepath.Join(root, "srv/static/new/app.js"))
	g.Expect(st.Mode().Perm()).To(Equal(os.FileMode(0o600)))
	leftovers, _ := filepath.Glob(filepath.Join(root, "srv/static/.devloop-sync-*"))
	g.Expect(leftovers).To(BeEmpty())

	// An opaque whiteout empties a directory.
	_, err = applyTar(r, bytes.NewReader(tarBytes(t, tarEntry{name: "srv/static/.wh..wh..opq", typeflag: tar.TypeReg})), false)
	g.Expect(err).NotTo(HaveOccurred())
	left, _ := os.ReadDir(filepath.Join(root, "srv/static"))
	g.Expect(left).To(BeEmpty())
}

// Entries that leave the root, name the supervisor's own files or are not
// files are refused, naming the entry.
func TestApplyTarRefuses(t *testing.T) {
	root := t.TempDir()
	r, err := os.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, tc := range []struct {
		entry tarEntry
		want  string
	}{
		{tarEntry{name: "../etc/passwd", body: "x", typeflag: tar.TypeReg}, `tar entry 0: "../etc/passwd" climbs with ..`},
		{tarEntry{name: "/.digest", body: "x", typeflag: tar.TypeReg}, `tar entry 0: "/.digest" is the supervisor's own file`},
		{tarEntry{name: "/.supervisor.sock", body: "x", typeflag: tar.TypeReg}, `is the supervisor's own file`},
		{tarEntry{name: "/", typeflag: tar.TypeDir}, `names the root`},
		{tarEntry{name: "/dev/null", typeflag: tar.TypeChar}, `syncing /dev/null: type '3' is not a regular file, directory, symlink or whiteout`},
		{tarEntry{name: "/.wh..wh..opq", typeflag: tar.TypeReg}, `would empty the whole live root`},
	} {
		g := NewWithT(t)
		_, err := applyTar(r, bytes.NewReader(tarBytes(t, tc.entry)), false)
		g.Expect(err).To(MatchError(ContainSubstring(tc.want)), tc.entry.name)
	}
	// A symlink planted by a sync cannot carry later writes outside.
	g := NewWithT(t)
	_, err = applyTar(r, bytes.NewReader(tarBytes(t,
		tarEntry{name: "/out", link: "/tmp", typeflag: tar.TypeSymlink},
		tarEntry{name: "/out/escaped", body: "x", typeflag: tar.TypeReg})), false)
	g.Expect(err).To(HaveOccurred())
	g.Expect("/tmp/escaped").NotTo(BeAnExistingFile())
}

// fakeSupervisor answers every notice at once, in-process.
func fakeSupervisor(t *testing.T, root string) {
	t.Helper()
	l, err := net.Listen("unix", filepath.Join(root, SocketName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	requests := make(chan request)
	go serve(l, requests)
	go func() {
		for req := range requests {
			req.answer <- reply{}
		}
	}()
}

// Each tar is the difference with the image: what an earlier sync wrote
// and a later one does not carry is the image's again (a link to the
// original) or gone (a file the image never had).
func TestSyncRevertsWhatALaterDigestNoLongerChanges(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	orig, root := filepath.Join(dir, "orig"), filepath.Join(dir, "live")
	g.Expect(os.MkdirAll(filepath.Join(orig, "srv"), 0o755)).To(Succeed())
	g.Expect(os.MkdirAll(root, 0o777)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(orig, "srv", "index.html"), []byte("image"), 0o644)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(orig, "server"), []byte("v1"), 0o755)).To(Succeed())
	_, err := seed(root, orig)
	g.Expect(err).NotTo(HaveOccurred())
	fakeSupervisor(t, root)
	ctx := context.Background()

	res, err := Sync(ctx, root, orig, "sha256:a", bytes.NewReader(tarBytes(t,
		tarEntry{name: "/srv/index.html", body: "a", typeflag: tar.TypeReg, mode: 0o644},
		tarEntry{name: "/srv/added.js", body: "added", typeflag: tar.TypeReg, mode: 0o644},
		tarEntry{name: "/.wh.server", typeflag: tar.TypeReg})))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Files).To(Equal(3))
	g.Expect(os.ReadFile(filepath.Join(root, "srv/index.html"))).To(Equal([]byte("a")))
	g.Expect(filepath.Join(root, "server")).NotTo(BeAnExistingFile())

	// The next digest changes only the server: the page is the image's
	// again, the added file gone, the server back (and new).
	_, err = Sync(ctx, root, orig, "sha256:b", bytes.NewReader(tarBytes(t,
		tarEntry{name: "/server", body: "v2", typeflag: tar.TypeReg, mode: 0o755})))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.Readlink(filepath.Join(root, "srv/index.html"))).To(Equal(filepath.Join(orig, "srv/index.html")))
	g.Expect(filepath.Join(root, "srv/added.js")).NotTo(BeAnExistingFile())
	g.Expect(os.ReadFile(filepath.Join(root, "server"))).To(Equal([]byte("v2")))

	// Back to the image's own files (an empty difference).
	res, err = Sync(ctx, root, orig, "sha256:c", bytes.NewReader(tarBytes(t)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Files).To(Equal(1), "the server put back counts: the program restarts")
	g.Expect(os.Readlink(filepath.Join(root, "server"))).To(Equal(filepath.Join(orig, "server")))
	g.Expect(os.ReadFile(filepath.Join(root, DigestName))).To(Equal([]byte("sha256:c\n")))
}
