package build

import (
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// goEnv is what devloop sets for the go command in a builder, unless the
// run step says otherwise:
//
//   - GOCACHE and GOMODCACHE on the build cache's paths. A builder image
//     that sets no GOPATH (a project's own Go builder, say) keeps the
//     module cache in $HOME/go/pkg/mod, off the cache volume: every build
//     downloaded every module again unless the author knew to set
//     GOMODCACHE. The module cache goes to a path ending in /pkg/mod (the
//     default /go/pkg/mod), else to go-mod on the first path; the build
//     cache to go-build on the first path that is not a module cache.
//   - GOFLAGS=-v: the go command then prints each package it compiles
//     (a cached one is not printed), which is how a build in the cluster
//     shows progress (progress.go).
//
// A variable the run step's env names is left to it. With run.envFrom
// none is set: a container's env wins over its envFrom, and what a
// ConfigMap or Secret holds is not known here.
func goEnv(req JobRequest) []corev1.EnvVar {
	if len(req.Run.EnvFrom) > 0 {
		return nil
	}
	var env []corev1.EnvVar
	set := func(name, value string) {
		if value == "" || slices.ContainsFunc(req.Run.Env, func(e v1alpha1.EnvVar) bool { return e.Name == name }) {
			return
		}
		env = append(env, corev1.EnvVar{Name: name, Value: value})
	}
	build, mod := goCacheDirs(req.Run.Cache.PathsOrDefault())
	set("GOCACHE", build)
	set("GOMODCACHE", mod)
	set("GOFLAGS", "-v")
	return env
}

// goCacheDirs are GOCACHE and GOMODCACHE on the cache paths ("" for
// GOCACHE when every path is a module cache).
func goCacheDirs(paths []string) (build, mod string) {
	for _, p := range paths {
		switch {
		case strings.HasSuffix(path.Clean(p), "/pkg/mod"):
			if mod == "" {
				mod = path.Clean(p)
			}
		case build == "":
			build = path.Join(p, "go-build")
		}
	}
	if mod == "" && build != "" {
		mod = path.Join(path.Dir(build), "go-mod")
	}
	return build, mod
}
