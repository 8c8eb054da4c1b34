package pods

import (
	"path"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// The go command's build cache in devloop's pods, builder and test pods
// alike. With the operator's team build cache (internal/teamcache) on,
// the go command reads and writes it through `helper gocacheprog`
// (GOCACHEPROG): its local entries are then in GoCacheProgDir, in the
// program's own layout, not in $HOME/.cache/go-build. A test pod on the
// build cache claim its images' builders share must therefore run the
// same program on the same directory, or its first run finds none of
// what they compiled (issue 34, item 3).

// Paths and names of the helper binary and the team cache token.
const (
	// ToolsDir holds the helper binary inside an image that knows nothing
	// of devloop (a builder or test image); ToolsHelper is the binary.
	ToolsDir    = "/var/run/devloop/tools"
	ToolsHelper = ToolsDir + "/devloop"
	// VolumeTools is the emptyDir behind ToolsDir.
	VolumeTools = "tools"
	// ContainerInstall copies the helper binary into the tools volume.
	ContainerInstall = "install"

	volumeCacheToken = "build-cache-token"
	// CacheTokenDir is where the projected token for the cache's audience
	// is mounted (file "token").
	CacheTokenDir = "/var/run/devloop/build-cache"
	// cacheTokenTTL is the projected token's lifetime; the kubelet
	// renews it before it ends.
	cacheTokenTTL = 3600
)

// TeamCacheService is the operator's team build cache as pods reach it.
type TeamCacheService struct {
	// URL is the service (https://HOST:PORT).
	URL string
	// Audience of the projected token pods present.
	Audience string
	// CA is the PEM bundle the service's certificate is checked against
	// (public: it goes into the pods' environment).
	CA string
}

// For is the team cache of a pod run as ServiceAccount sa: nil when
// there is no service, or no ServiceAccount (an environment acting as the
// operator itself has none to run a pod as, and the service knows
// callers only by it).
func (s *TeamCacheService) For(sa string) *TeamCache {
	if s == nil || s.URL == "" || sa == "" {
		return nil
	}
	return &TeamCache{URL: s.URL, Audience: s.Audience, CA: s.CA, ServiceAccount: sa}
}

// TeamCache is what a pod needs to reach the team cache.
type TeamCache struct {
	URL, Audience, CA string
	// ServiceAccount is the environment's: the pod runs as it, so its
	// token names the environment's identity (the service checks both).
	ServiceAccount string
}

// EnvTeamCacheCA holds the PEM bundle `helper gocacheprog` checks the
// team cache's certificate against.
const EnvTeamCacheCA = "DEVLOOP_BUILD_CACHE_CA"

// GoCacheProgDir is the program's local cache: on the first cache path
// (the build cache claim when there is one), beside Go's own go-build.
func GoCacheProgDir(cachePaths []string) string {
	return path.Join(cachePaths[0], "devloop-gocache")
}

// GoCacheProgEnv points the go command at `helper gocacheprog` with its
// local cache on the first of cachePaths and the team cache tc behind it;
// none without tc. The go command before 1.24 ignores GOCACHEPROG and
// keeps its own cache ($HOME/.cache/go-build).
func GoCacheProgEnv(cachePaths []string, tc *TeamCache) []corev1.EnvVar {
	if tc == nil || len(cachePaths) == 0 {
		return nil
	}
	env := []corev1.EnvVar{{Name: "GOCACHEPROG", Value: ToolsHelper + " helper gocacheprog --dir " + GoCacheProgDir(cachePaths) +
		" --url " + tc.URL + " --token-file " + CacheTokenDir + "/token"}}
	if tc.CA != "" {
		// The go command starts the program with its own environment.
		env = append(env, corev1.EnvVar{Name: EnvTeamCacheCA, Value: tc.CA})
	}
	return env
}

// WithTeamCacheToken runs a pod as the environment's ServiceAccount with
// a token for the cache's audience only, mounted in c alone (no API
// token comes with it: whether the pod has one is the caller's choice).
func WithTeamCacheToken(spec *corev1.PodSpec, c *corev1.Container, tc *TeamCache) {
	if tc == nil {
		return
	}
	spec.ServiceAccountName = tc.ServiceAccount
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: volumeCacheToken, VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{
			ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Audience: tc.Audience, ExpirationSeconds: ptr.To[int64](cacheTokenTTL), Path: "token",
			},
		}}},
	}})
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: volumeCacheToken, MountPath: CacheTokenDir, ReadOnly: true})
}

// InstallTools is the init container copying the helper binary (from the
// operator's image) into the tools volume, the volume, and its read-only
// mount for the container that runs ToolsHelper.
func InstallTools(helperImage string) (corev1.Container, corev1.Volume, corev1.VolumeMount) {
	mount := corev1.VolumeMount{Name: VolumeTools, MountPath: ToolsDir}
	install := HelperContainer(ContainerInstall, helperImage, []string{"helper", "install", "--to", ToolsHelper}, []corev1.VolumeMount{mount})
	mount.ReadOnly = true
	return install, corev1.Volume{Name: VolumeTools, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}, mount
}
