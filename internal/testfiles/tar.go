package testfiles

import (
	"archive/tar"
	"errors"
	"io"
	"testing"
)

// TarEntry is one entry of a tar stream: its header and its content.
type TarEntry struct {
	*tar.Header
	Content string
}

// ReadTar reads every entry of a tar stream, in order.
func ReadTar(t testing.TB, r io.Reader) []TarEntry {
	t.Helper()
	var out []TarEntry
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		content, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, TarEntry{Header: h, Content: string(content)})
	}
}

// Layer is what LayerEntries reads: an image layer (v1.Layer) or anything
// else that opens as an uncompressed tar.
type Layer interface {
	Uncompressed() (io.ReadCloser, error)
}

// LayerEntries reads every entry of an image layer's uncompressed tar.
func LayerEntries(t testing.TB, l Layer) []TarEntry {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	return ReadTar(t, rc)
}
