package build

import (
	"path"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// TestBuilderPutsGoCachesOnTheCacheVolume (issue 42): a builder image that
// sets no GOPATH kept Go's module cache off the build cache volume. The
// build container's env puts GOMODCACHE and GOCACHE on the cache's mounts
// when the run step sets none — with the default paths and with the
// spec's own — in a builder Job and in a warm build alike; a value the run
// step's env sets is the only one; with run.envFrom (which the
// container's env would override) devloop sets neither.
func TestBuilderPutsGoCachesOnTheCacheVolume(t *testing.T) {
	for _, tc := range []struct {
		name               string
		paths              []string
		wantMod, wantBuild string
	}{
		{"default paths", nil, "/go/pkg/mod", v1alpha1.BuilderHome + "/.cache/go-build"},
		{"one path of the spec", []string{"/cache"}, "/cache/go-mod", "/cache/go-build"},
		{"module cache path of the spec", []string{"/root/go/pkg/mod/", "/var/cache/build"}, "/root/go/pkg/mod", "/var/cache/build/go-build"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			req := warmRequest()
			if tc.paths != nil {
				req.Run.Cache = &v1alpha1.BuildCache{Paths: tc.paths}
			}
			build := jobBuildContainer(t, req)
			g.Expect(envValues(build.Env, "GOMODCACHE")).To(Equal([]string{tc.wantMod}))
			g.Expect(envValues(build.Env, "GOCACHE")).To(Equal([]string{tc.wantBuild}))
			for _, dir := range []string{tc.wantMod, tc.wantBuild} {
				g.Expect(onCacheVolume(build, dir)).To(BeTrue(), "%s is not on the cache volume: mounts %v", dir, build.VolumeMounts)
			}
			// A warm build gets the same with each build.
			g.Expect(envValues(runEnv(req), "GOMODCACHE")).To(Equal([]string{tc.wantMod}))
		})
	}

	t.Run("the run step's own", func(t *testing.T) {
		g := NewWithT(t)
		req := warmRequest()
		req.Run.Env = []v1alpha1.EnvVar{{Name: "GOMODCACHE", Value: "/mine/mod"}, {Name: "GOCACHE", Value: "/mine/build"}}
		build := jobBuildContainer(t, req)
		g.Expect(envValues(build.Env, "GOMODCACHE")).To(Equal([]string{"/mine/mod"}))
		g.Expect(envValues(build.Env, "GOCACHE")).To(Equal([]string{"/mine/build"}))
	})
	t.Run("with envFrom", func(t *testing.T) {
		g := NewWithT(t)
		req := warmRequest()
		req.Run.EnvFrom = []v1alpha1.EnvFromSource{{Kind: "ConfigMap", Name: "build-settings"}}
		build := jobBuildContainer(t, req)
		g.Expect(envValues(build.Env, "GOMODCACHE")).To(BeEmpty())
		g.Expect(envValues(build.Env, "GOCACHE")).To(BeEmpty())
	})
}

// jobBuildContainer is the container of req's builder Job that runs the
// run step.
func jobBuildContainer(t *testing.T, req JobRequest) corev1.Container {
	t.Helper()
	job, err := BuilderJob(req)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range job.Spec.Template.Spec.InitContainers {
		if c.Name == ContainerBuild {
			return c
		}
	}
	t.Fatalf("no %s container in %v", ContainerBuild, job.Spec.Template.Spec.InitContainers)
	return corev1.Container{}
}

// envValues are the values of name in env, in order.
func envValues(env []corev1.EnvVar, name string) []string {
	var values []string
	for _, e := range env {
		if e.Name == name {
			values = append(values, e.Value)
		}
	}
	return values
}

// onCacheVolume says whether dir is at or under one of c's mounts of the
// build cache volume.
func onCacheVolume(c corev1.Container, dir string) bool {
	for _, m := range c.VolumeMounts {
		mount := path.Clean(m.MountPath)
		if m.Name == "cache" && (dir == mount || strings.HasPrefix(dir, mount+"/")) {
			return true
		}
	}
	return false
}
