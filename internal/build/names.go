package build

import (
	"strings"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/pods"
)

// Names of what the engine creates for an image (pods.HashedName). Each is
// a readable prefix and a short hash of the full identity it stands for, so
// two identities never share a name however their parts are split by
// dashes (environment "a" with image "b-c" and environment "a-b" with image
// "c"), and a prefix cut to fit 63 characters loses nothing.
//
// The warm builder of an image for a platform is named
//
//	<env>-<image>-<arch>-<hash>-warm
//
// where <image> has '/', '.' and '_' turned into '-', <arch> is the
// platform without its OS ("amd64", "armv7"), the readable part is cut to
// fit, and <hash> is the first 8 hex digits of the SHA-256 of
// "<env>\n<image>\n<platform>" (the names as written in the spec):
//
//	printf '%s\n%s\n%s' api tools/ginkgo linux/amd64 | sha256sum | cut -c1-8
//
// A namespace admin can thus grant the environment's ServiceAccount
// pods/exec on exactly its warm builders (resourceNames). The build cache
// claim, shared by the images of one source and builder image, is
// "<env>-<source>-<hash>-gocache" (pods.ImageCacheShare).

// WarmPodName is the name of the warm builder of env's image for platform.
func WarmPodName(env, image, platform string) string {
	return pods.HashedName(env+"-"+sanitize(image)+"-"+archOf(platform), "-warm", env, image, platform)
}

// CacheClaimName is the name of the build cache claim env's image mounts
// (shared with the images of the same source and builder image,
// pods.ImageCacheShare), "" for an image without a run step cache.
func CacheClaimName(env *v1alpha1.DevEnvironment, image string) string {
	for _, c := range env.Spec.Components {
		for i := range c.Images {
			if c.Images[i].Name == image {
				share, _ := pods.ImageCacheShare(env, &c.Images[i])
				return share.Claim
			}
		}
	}
	return ""
}

// builderJobName is "<env>-<image>-<arch>-<hash>", at most 63 characters
// (Job names become pod label values); the hash covers the identity and
// the inputs, so a new input is a new Job.
func builderJobName(env, image, platform, inputs string) string {
	return pods.HashedName(env+"-"+sanitize(image)+"-"+archOf(platform), "", env, image, platform, inputs)
}

// archOf is a platform's name part: "arm64" for linux/arm64, "armv7" for
// linux/arm/v7.
func archOf(platform string) string {
	if parts := strings.Split(platform, "/"); len(parts) >= 2 {
		return strings.Join(parts[1:], "")
	}
	return platform
}

// sanitize makes an image name ("tools/ginkgo") fit a resource name.
func sanitize(s string) string {
	return strings.NewReplacer("/", "-", ".", "-", "_", "-").Replace(s)
}
