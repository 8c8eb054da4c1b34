package source

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/devloop-dev/devloop/internal/fault"
)

// entry is one tar entry of a test archive.
type entry struct {
	name string
	typ  byte
	body string
	link string
	mode int64
}

func tfile(name, body string) entry { return entry{name: name, typ: tar.TypeReg, body: body} }
func tdir(name string) entry        { return entry{name: name, typ: tar.TypeDir} }
func tsymlink(name, target string) entry {
	return entry{name: name, typ: tar.TypeSymlink, link: target}
}
func thardlink(name, target string) entry {
	return entry{name: name, typ: tar.TypeLink, link: target}
}

func tarOf(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		hdr := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: mode, Size: int64(len(e.body)), ModTime: time.Unix(1, 0)}
		if e.typ != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestExtractTarRefusesUnsafeArchives(t *testing.T) {
	tests := []struct {
		name    string
		entries []entry
		maxSize int64
		want    string
	}{
		{"parent traversal", []entry{tfile("../x", "evil")}, 0, "points outside"},
		{"nested traversal", []entry{tfile("a/../../x", "evil")}, 0, "points outside"},
		{"absolute path", []entry{tfile("/etc/x", "evil")}, 0, "absolute path"},
		{"absolute symlink", []entry{tsymlink("l", "/etc/passwd")}, 0, "absolute target"},
		{"escaping symlink", []entry{tsymlink("a/l", "../../x")}, 0, "points outside"},
		{"escape through a symlink chain", []entry{tsymlink("a", "."), tsymlink("b", "a/..")}, 0, "outside the tree"},
		{"escape through a symlinked parent", []entry{tdir("d"), tsymlink("d/up", ".."), tsymlink("x", "d/up/..")}, 0, "outside the tree"},
		{"hard link outside", []entry{thardlink("h", "../etc/passwd")}, 0, "outside the target"},
		{"absolute hard link", []entry{thardlink("h", "/etc/passwd")}, 0, "outside the target"},
		{"hard link to nothing in the archive", []entry{thardlink("h", "missing")}, 0, "not a regular file"},
		{"hard link to a symlink", []entry{tfile("f", "x"), tsymlink("l", "f"), thardlink("h", "l")}, 0, "not a regular file"},
		{"character device", []entry{{name: "dev", typ: tar.TypeChar}}, 0, "device file"},
		{"block device", []entry{{name: "dev", typ: tar.TypeBlock}}, 0, "device file"},
		{"fifo", []entry{{name: "p", typ: tar.TypeFifo}}, 0, "fifo"},
		{"header over max size", []entry{tfile("big", strings.Repeat("x", 100))}, 50, "maximum size of 50"},
		{"sum of files over max size", []entry{tfile("a", strings.Repeat("x", 30)), tfile("b", strings.Repeat("x", 30))}, 50, "maximum size of 50"},
	}
	for _, tt := range tests {
		for _, compress := range []bool{false, true} {
			name := tt.name
			if compress {
				name += "/gzip"
			}
			t.Run(name, func(t *testing.T) {
				b := tarOf(t, tt.entries...)
				if compress {
					b = gzipped(t, b)
				}
				maxSize := tt.maxSize
				if maxSize == 0 {
					maxSize = 1 << 20
				}
				dir := t.TempDir()
				err := ExtractTar(bytes.NewReader(b), dir, maxSize)
				if err == nil {
					t.Fatalf("extracted an unsafe archive")
				}
				if !fault.IsPermanent(err) {
					t.Errorf("error %v is not permanent", err)
				}
				if !strings.Contains(err.Error(), tt.want) {
					t.Errorf("error %q does not say %q", err, tt.want)
				}
				if _, err := os.Lstat(filepath.Join(filepath.Dir(dir), "x")); err == nil {
					t.Errorf("wrote outside the target directory")
				}
			})
		}
	}
}

func TestExtractTarWritesSafeArchives(t *testing.T) {
	dir := t.TempDir()
	b := gzipped(t, tarOf(t,
		tdir("./a/"),
		tfile("a/b.txt", "hello"),
		entry{name: "a/run.sh", typ: tar.TypeReg, body: "#!/bin/sh", mode: 0o4777},
		tfile("deep/er/c.txt", "implicit parents"),
		tsymlink("a/link", "b.txt"),
		tsymlink("up", "a/../deep"),
		thardlink("a/hard", "a/b.txt"),
		tfile("a/b.txt", "replaced"), // a later entry wins, even over a hard-linked file
		tsymlink("dangling", "nowhere/x"),
	))
	if err := ExtractTar(bytes.NewReader(b), dir, 1<<20); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, "a/b.txt")); got != "replaced" {
		t.Errorf("a/b.txt = %q", got)
	}
	if got := readFile(t, filepath.Join(dir, "a/hard")); got != "hello" {
		t.Errorf("a/hard = %q", got)
	}
	if got := readFile(t, filepath.Join(dir, "a/link")); got != "replaced" {
		t.Errorf("a/link = %q", got)
	}
	if got := readFile(t, filepath.Join(dir, "up/er/c.txt")); got != "implicit parents" {
		t.Errorf("up/er/c.txt = %q", got)
	}
	fi, err := os.Stat(filepath.Join(dir, "a/run.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o755 || fi.Mode()&os.ModeSetuid != 0 {
		t.Errorf("run.sh mode = %v, want 0755 without setuid", fi.Mode())
	}
}

func TestExtractTarRefusesGarbage(t *testing.T) {
	err := ExtractTar(strings.NewReader(strings.Repeat("not a tar archive ", 100)), t.TempDir(), 1<<20)
	if err == nil || !fault.IsPermanent(err) {
		t.Fatalf("got %v, want a permanent error", err)
	}
}

func TestLayersApplyInOrderWithWhiteouts(t *testing.T) {
	dir := t.TempDir()
	x, err := newExtractor(dir, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	defer x.close()
	layers := [][]byte{
		tarOf(t, tfile("keep.txt", "v1"), tfile("gone.txt", "x"), tfile("opq/old.txt", "x"), tfile("opq/sub/old.txt", "x"), tfile("f", "file")),
		tarOf(t, tfile("keep.txt", "v2"), tfile(".wh.gone.txt", ""), tfile("opq/sub/new.txt", "new"), tfile("opq/.wh..wh..opq", ""), tfile("f/now-a-dir.txt", "d")),
	}
	for _, l := range layers {
		if err := x.add(bytes.NewReader(l)); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.finish(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, "keep.txt")); got != "v2" {
		t.Errorf("keep.txt = %q, want the later layer's", got)
	}
	for _, p := range []string{"gone.txt", "opq/old.txt", "opq/sub/old.txt"} {
		if _, err := os.Lstat(filepath.Join(dir, p)); err == nil {
			t.Errorf("%s survived its whiteout", p)
		}
	}
	if got := readFile(t, filepath.Join(dir, "opq/sub/new.txt")); got != "new" {
		t.Errorf("opq/sub/new.txt = %q", got)
	}
	if got := readFile(t, filepath.Join(dir, "f/now-a-dir.txt")); got != "d" {
		t.Errorf("f/now-a-dir.txt = %q", got)
	}
}

func TestTreeDigest(t *testing.T) {
	write := func(t *testing.T, files map[string]string, exec ...string) string {
		t.Helper()
		dir := t.TempDir()
		writeFiles(t, dir, files)
		for _, name := range exec {
			if err := os.Chmod(filepath.Join(dir, name), 0o750); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	digest := func(t *testing.T, dir string) string {
		t.Helper()
		d, err := TreeDigest(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !validDigest.MatchString(d) {
			t.Fatalf("digest %q is not sha256:<hex>", d)
		}
		return d
	}
	base := map[string]string{"a.txt": "a", "d/b.txt": "b"}
	d1 := digest(t, write(t, base))

	again := write(t, base)
	if err := os.Chtimes(filepath.Join(again, "a.txt"), time.Unix(5, 0), time.Unix(5, 0)); err != nil {
		t.Fatal(err)
	}
	if d := digest(t, again); d != d1 {
		t.Errorf("same content, other mtime: %s != %s", d, d1)
	}
	for name, files := range map[string]map[string]string{
		"changed content": {"a.txt": "A", "d/b.txt": "b"},
		"renamed file":    {"a2.txt": "a", "d/b.txt": "b"},
		"moved file":      {"a.txt": "a", "e/b.txt": "b"},
		"boundary shift":  {"a.txt": "a\x00", "d/b.txt": "b"},
	} {
		if d := digest(t, write(t, files)); d == d1 {
			t.Errorf("%s: digest unchanged", name)
		}
	}
	if d := digest(t, write(t, base, "a.txt")); d == d1 {
		t.Errorf("executable bit: digest unchanged")
	}

	escaping := write(t, base)
	if err := os.Symlink("../../etc", filepath.Join(escaping, "d/l")); err != nil {
		t.Fatal(err)
	}
	if _, err := TreeDigest(escaping); err == nil || !fault.IsPermanent(err) {
		t.Errorf("escaping symlink: got %v, want a permanent error", err)
	}
}
