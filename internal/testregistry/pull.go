package testregistry

import (
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Pull fetches the image at ref (a tag or a digest) from a test registry,
// which speaks plain HTTP, and fails the test when it is not there.
func Pull(t testing.TB, ref string) v1.Image {
	t.Helper()
	img, err := remote.Image(parse(t, ref))
	if err != nil {
		t.Fatalf("pulling %s: %v", ref, err)
	}
	return img
}

// PullIndex is Pull for an image index (a multi-platform image).
func PullIndex(t testing.TB, ref string) v1.ImageIndex {
	t.Helper()
	idx, err := remote.Index(parse(t, ref))
	if err != nil {
		t.Fatalf("pulling the index %s: %v", ref, err)
	}
	return idx
}

func parse(t testing.TB, ref string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
