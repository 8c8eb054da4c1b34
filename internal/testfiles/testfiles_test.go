package testfiles

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// A tree written by Tree reads back, and a tar written from it reads back
// entry by entry with headers and contents.
func TestTreeAndTarRoundTrip(t *testing.T) {
	dir := Tree(t, map[string]string{"a.txt": "a", "sub/b.txt": "bb"})
	if data, err := os.ReadFile(filepath.Join(dir, "sub", "b.txt")); err != nil || string(data) != "bb" {
		t.Fatalf("sub/b.txt: %q %v", data, err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range []string{"a.txt", "sub/b.txt"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	entries := ReadTar(t, &buf)
	if len(entries) != 2 || entries[0].Name != "a.txt" || entries[0].Content != "a" ||
		entries[1].Name != "sub/b.txt" || entries[1].Content != "bb" || entries[1].Mode != 0o644 {
		t.Fatalf("entries %+v", entries)
	}
}
