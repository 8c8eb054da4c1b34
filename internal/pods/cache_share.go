package pods

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// One compile per tree (issue 34): the images of an environment built
// from the same source by the same builder image, with the same cache
// paths, share ONE build cache claim, and so do the test suites that run
// in that builder image on that source. Go's build cache is keyed by what
// it compiles (toolchain, GOOS/GOARCH, flags, file contents), so what one
// image's build compiled is found by the next: Volcano's three binaries
// compile client-go once. The builders of one share and platform also take
// turns (the build engine's lanes), so two of them never compile the same
// packages side by side on the same cores.
//
// The share is keyed by the builder image as written (run.image, the
// suite's image.ref), not by the digest it resolves to: a moved tag keeps
// the claim, and Go's cache tells toolchains apart by itself.

// CacheShare is a build cache claim shared by the images (and suites) of
// one environment with the same source, builder image and cache paths.
type CacheShare struct {
	// Claim is the PersistentVolumeClaim's name.
	Claim string
	// Paths are where builders mount it, one subPath ("p0", "p1", ...)
	// per path, in order; a suite mounts the same subPaths at the same
	// paths.
	Paths []string
	// Size is the largest size the sharing images ask for (the claim is
	// created once, whichever of them comes first).
	Size *resource.Quantity
	// Images are the sharing images, in spec order.
	Images []string
}

// ImageCacheShare is the cache share of env's image img (as written in the
// spec, before its run step is rendered); false when img has no run step
// with a cache.
func ImageCacheShare(env *v1alpha1.DevEnvironment, img *v1alpha1.ImageSpec) (CacheShare, bool) {
	if img.Run == nil || img.Run.Cache == nil {
		return CacheShare{}, false
	}
	return shareOf(env, img.Source, img.Run.Image, img.Run.Cache.PathsOrDefault()), true
}

// SuiteCacheShare is the cache share a suite with a cache joins: the first
// one, in spec order, of images built from the suite's source in the
// suite's image. False when none is: the suite keeps a claim of its own.
func SuiteCacheShare(env *v1alpha1.DevEnvironment, suite *v1alpha1.TestSuite) (CacheShare, bool) {
	if suite.Cache == nil || suite.Source == "" || suite.Image.Ref == "" {
		return CacheShare{}, false
	}
	for _, c := range env.Spec.Components {
		for i := range c.Images {
			img := &c.Images[i]
			if img.Run != nil && img.Run.Cache != nil && img.Source == suite.Source && img.Run.Image == suite.Image.Ref {
				share, _ := ImageCacheShare(env, img)
				if suite.Cache.Size != nil && (share.Size == nil || suite.Cache.Size.Cmp(*share.Size) > 0) {
					share.Size = suite.Cache.Size
				}
				return share, true
			}
		}
	}
	return CacheShare{}, false
}

// shareOf gathers the images of env sharing (source, builder, paths).
// The suites joining it may ask for a larger size: SuiteCacheShare takes
// the larger one, and the claim is sized by whoever creates it first.
func shareOf(env *v1alpha1.DevEnvironment, source, builder string, paths []string) CacheShare {
	key := cacheShareKey(source, builder, paths)
	share := CacheShare{Paths: paths,
		Claim: HashedName(env.Name+"-"+sanitizeName(source), "-gocache", env.Name, "shared build cache", key)}
	for _, c := range env.Spec.Components {
		for i := range c.Images {
			img := &c.Images[i]
			if img.Run == nil || img.Run.Cache == nil || cacheShareKey(img.Source, img.Run.Image, img.Run.Cache.PathsOrDefault()) != key {
				continue
			}
			share.Images = append(share.Images, img.Name)
			if s := img.Run.Cache.Size; s != nil && (share.Size == nil || s.Cmp(*share.Size) > 0) {
				share.Size = s
			}
		}
	}
	return share
}

// cacheShareKey is one line per part: no part holds a newline (source
// names and image references cannot), so no two keys collide.
func cacheShareKey(source, builder string, paths []string) string {
	return source + "\n" + builder + "\n" + strings.Join(paths, "\n")
}

// sanitizeName makes a source name fit the readable part of a resource
// name.
func sanitizeName(s string) string {
	return strings.NewReplacer("/", "-", ".", "-", "_", "-").Replace(s)
}

// LabelBuildCache on a builder Job, a warm builder pod or a test Job names
// the build cache claim it mounts: the builders and suites of one claim
// find one another by it, to take turns.
const LabelBuildCache = "devloop.dev/build-cache"
