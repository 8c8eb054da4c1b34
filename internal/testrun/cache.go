package testrun

import (
	"context"
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/pods"
)

// A suite's cache (tests[].cache) is the build cache its images' builders
// share when the suite runs in their builder image on their source
// (withSharedCache: its first run after they built starts warm); else one
// claim per suite, created as the
// tenant like build caches (pods.EnsureCacheClaim) and mounted whole at
// $HOME/.cache: Go's build cache is $HOME/.cache/go-build, and GOMODCACHE
// points the module cache into it too. The volume's root is writable by
// the pod's fsGroup (or made so by the provisioner); subPath directories
// would be created by the kubelet as root, which the test user could not
// write.
const (
	volumeTestCache = "test-cache"
	testCacheDir    = homeDir + "/.cache"
	// moduleCacheDir replaces /go/pkg/mod, which would be lost with the
	// container; a suite's own GOMODCACHE still wins.
	moduleCacheDir = testCacheDir + "/gomod"
)

// CacheClaimName is the test cache claim of env's suite:
// "<env>-<suite>-<hash>-tcache", hashing "<env>\ntest\n<suite>", so it
// never meets an image's build cache claim ("-cache") of the same name.
func CacheClaimName(env, suite string) string {
	return pods.HashedName(env+"-"+suite, "-tcache", env, "test", suite)
}

// withSharedCache mounts the build cache claim the suite shares with the
// images built from its source in its image (pods.SuiteCacheShare) as
// their builders mount it: subPath "p<i>" at the i-th path, so `go test`
// finds what their builds compiled ($HOME/.cache/go-build) and the
// modules they downloaded (/go/pkg/mod). The fetch container, as the test
// user, creates the subPath directories first (the kubelet would create
// them as root).
func withSharedCache(job *batchv1.Job, share pods.CacheShare) {
	// The claim's builder Jobs find the suite's by it, to take turns
	// (turns.go).
	job.Labels[pods.LabelBuildCache] = share.Claim
	spec := &job.Spec.Template.Spec
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: volumeTestCache, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: share.Claim}}})
	var mounts []corev1.VolumeMount
	var subPaths []string
	for i, path := range share.Paths {
		sub := fmt.Sprintf("p%d", i)
		subPaths = append(subPaths, sub)
		mounts = append(mounts, corev1.VolumeMount{Name: volumeTestCache, MountPath: path, SubPath: sub})
	}
	for i := range spec.Containers {
		if c := &spec.Containers[i]; c.Name == ContainerTest {
			c.VolumeMounts = append(c.VolumeMounts, mounts...)
		}
	}
	for i := range spec.InitContainers {
		if c := &spec.InitContainers[i]; c.Name == pods.ContainerFetch {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: volumeTestCache, MountPath: sharedCacheRoot})
			c.Args = append(c.Args, "--cache-root", sharedCacheRoot, "--cache-dirs", strings.Join(subPaths, ","))
		}
	}
}

// withGoCacheProg gives the suite's go command the cache its images'
// builders use on the claim they share: with the team cache on (tc), the
// builders' go reads and writes through `helper gocacheprog` with its
// local entries in pods.GoCacheProgDir on the claim, not in
// $HOME/.cache/go-build, so a suite running plain go there would find
// none of them. The suite then runs the same program on the same
// directory, copied in by an init container as in builder Jobs, and
// reaches the team cache as they do: as the environment's ServiceAccount
// with a token for the cache's audience, mounted in the test container
// only. The service reads through the environment's trust
// (spec.cache.readFrom) and writes only its own store. Without tc the
// builders' go uses its own cache on the claim, and so does the suite's.
// A suite whose image's go is older than 1.24 ignores GOCACHEPROG and
// starts cold: its builders' go is the same one, so they did too.
func withGoCacheProg(job *batchv1.Job, share pods.CacheShare, tc *pods.TeamCache, helperImage string) {
	prog := pods.GoCacheProgEnv(share.Paths, tc)
	if prog == nil {
		return
	}
	spec := &job.Spec.Template.Spec
	install, tools, toolsMount := pods.InstallTools(helperImage)
	spec.InitContainers = append(spec.InitContainers, install)
	spec.Volumes = append(spec.Volumes, tools)
	for i := range spec.Containers {
		if c := &spec.Containers[i]; c.Name == ContainerTest {
			c.VolumeMounts = append(c.VolumeMounts, toolsMount)
			// Before the suite's env: a suite may still set its own.
			c.Env = append(prog, c.Env...)
			pods.WithTeamCacheToken(spec, c, tc)
		}
	}
}

// sharedCacheRoot is where the fetch container mounts a shared cache
// claim whole, to create its subPath directories.
const sharedCacheRoot = "/var/run/devloop/cache"

// withCache mounts the suite's cache claim in the test container. The
// GOMODCACHE entry comes before the suite's env, so the suite may move it.
func withCache(job *batchv1.Job, claim string) {
	spec := &job.Spec.Template.Spec
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: volumeTestCache, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
	for i := range spec.Containers {
		c := &spec.Containers[i]
		if c.Name != ContainerTest {
			continue
		}
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: volumeTestCache, MountPath: testCacheDir})
		c.Env = append([]corev1.EnvVar{{Name: "GOMODCACHE", Value: moduleCacheDir}}, c.Env...)
	}
}

// ensureCache creates the cache claim of the Job's suite, if it has a
// cache, before the Job that mounts it.
func (p *testPass) ensureCache(ctx context.Context, tenant client.Client, job *batchv1.Job) error {
	var suite *v1alpha1.TestSuite
	for i := range p.env.Spec.Tests {
		if p.env.Spec.Tests[i].Name == job.Labels[v1alpha1.LabelSuite] {
			suite = &p.env.Spec.Tests[i]
		}
	}
	if suite == nil || suite.Cache == nil {
		return nil
	}
	if share, ok := pods.SuiteCacheShare(p.env, suite); ok {
		ok, err := pods.EnsureCacheClaim(ctx, tenant, p.env, pods.CacheClaim{Name: share.Claim, What: "build cache claim", Size: share.Size,
			Labels: map[string]string{v1alpha1.LabelEnvironment: v1alpha1.LabelValue(p.env.Name), v1alpha1.LabelRole: v1alpha1.RoleBuildCache}})
		if err == nil && !ok {
			err = &notOursError{fmt.Sprintf("build cache claim %s exists and belongs to another owner: devloop neither uses nor replaces it (remove it)", share.Claim)}
		}
		return err
	}
	name := CacheClaimName(p.env.Name, suite.Name)
	ok, err := pods.EnsureCacheClaim(ctx, tenant, p.env, pods.CacheClaim{Name: name, What: "test cache claim", Size: suite.Cache.Size,
		Labels: map[string]string{v1alpha1.LabelEnvironment: v1alpha1.LabelValue(p.env.Name), v1alpha1.LabelSuite: suite.Name,
			v1alpha1.LabelRole: v1alpha1.RoleTestCache}})
	if err == nil && !ok {
		err = &notOursError{fmt.Sprintf("test cache claim %s exists and belongs to another owner: devloop neither uses nor replaces it (rename the suite, or remove it)", name)}
	}
	return err
}

// notOursError is a cache claim of the suite's name the environment does
// not own: the run ends with Error rather than retrying forever.
type notOursError struct{ msg string }

func (e *notOursError) Error() string { return e.msg }
