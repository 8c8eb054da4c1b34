package cli

import (
	"os"
	"testing"

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
	if b := d.lookup("reg/team/src")("bin/server", "server"); b == nil || b.Digest != want || string(b.Tar) != "a whole tar" {
		t.Fatalf("base %+v, want the layer pushed whole (%s)", b, want)
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
}
