package cli

import (
	"os"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/devloop-dev/devloop/internal/source"
)

// push --delta keeps a mapped layer pushed whole as its mapping's next
// base, per repository; a layer sent as a delta is not a base (the
// registry never had it whole), and a base damaged on disk is not used.
func TestPushDeltaKeepsWhatWasPushedWhole(t *testing.T) {
	d := &deltaBases{dir: t.TempDir()}
	whole := static.NewLayer([]byte("a whole tar"), types.OCIUncompressedLayer)
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: whole, Annotations: map[string]string{
		source.AnnotationLayerFrom: "bin/server", source.AnnotationLayerTo: "server"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.keepWhole("reg/team/src", img); err != nil {
		t.Fatal(err)
	}
	want, _ := whole.Digest()
	first := d.lookup("reg/team/src")("bin/server", "server")
	if first == nil || first.Digest != want || string(first.Tar) != "a whole tar" {
		t.Fatalf("base %+v, want the layer pushed whole (%s)", first, want)
	}
	// The next push (a watch's) takes the base read already, not the file
	// read and hashed again.
	if b := d.lookup("reg/team/src")("bin/server", "server"); b != first {
		t.Errorf("the unchanged base was read again: %p, want %p", b, first)
	}
	if b := d.lookup("reg/other/src")("bin/server", "server"); b != nil {
		t.Errorf("another repository's push has a base: %+v", b)
	}

	delta := static.NewLayer([]byte("ops"), source.MediaTypeDelta)
	img, err = mutate.Append(empty.Image, mutate.Addendum{Layer: delta, Annotations: map[string]string{
		source.AnnotationLayerFrom: "bin/server", source.AnnotationLayerTo: "server"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.keepWhole("reg/team/src", img); err != nil {
		t.Fatal(err)
	}
	if b := d.lookup("reg/team/src")("bin/server", "server"); b == nil || b.Digest != want {
		t.Errorf("a delta replaced the base: %+v", b)
	}

	if err := os.WriteFile(d.file("reg/team/src", "bin/server", "server"), []byte(want.String()+"\nnot the tar"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b := d.lookup("reg/team/src")("bin/server", "server"); b != nil {
		t.Errorf("a damaged base was used: %+v", b)
	}
	// Damaged in place, the same size: read (and refused) again.
	if err := d.keepWhole("reg/team/src", mustAppend(t, whole)); err != nil {
		t.Fatal(err)
	}
	if b := d.lookup("reg/team/src")("bin/server", "server"); b == nil {
		t.Fatal("the base kept again is not used")
	}
	file := d.file("reg/team/src", "bin/server", "server")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 1
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if b := d.lookup("reg/team/src")("bin/server", "server"); b != nil {
		t.Errorf("a base damaged in place, the same size, was used: %+v", b)
	}
}

func mustAppend(t *testing.T, l v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: l, Annotations: map[string]string{
		source.AnnotationLayerFrom: "bin/server", source.AnnotationLayerTo: "server"}})
	if err != nil {
		t.Fatal(err)
	}
	return img
}
