// Package testenv starts a real kube-apiserver and etcd for tests (envtest)
// with devloop's CRDs installed, using the binaries `make test` builds from
// Go modules into bin/k8s/<versions>/.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// DefaultAssets is the asset directory hack/k8s-binaries.sh fills with the
// default version (the Makefile's K8S_VERSION).
const DefaultAssets = "bin/k8s/v1.37.2"

// RepoRoot is the root of the devloop module.
func RepoRoot() string {
	_, file, _, _ := goruntime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// AssetsDir is $KUBEBUILDER_ASSETS, or the default directory under bin/.
// It fails with what to run when the binaries are missing.
func AssetsDir() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = filepath.Join(RepoRoot(), DefaultAssets)
	}
	if _, err := os.Stat(filepath.Join(dir, "kube-apiserver")); err != nil {
		return "", errors.New("no kube-apiserver in " + dir + ": run `make test` (or hack/k8s-binaries.sh) to build the test binaries")
	}
	return dir, nil
}

// Scheme holds the built-in types and devloop's.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}

// startTimeout bounds the start of etcd, of kube-apiserver and the wait
// for the CRDs. envtest's defaults (20 s, 10 s) are for an idle machine:
// at a load average of 30 on 2 cores, kube-apiserver took longer than 20 s
// to answer, five times over, and every suite of `make test` failed before
// its first test. KUBEBUILDER_CONTROLPLANE_START_TIMEOUT still overrides.
const startTimeout = 3 * time.Minute

// environment is the envtest of Start, not started.
func environment(assets string) *envtest.Environment {
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		Scheme:                Scheme(),
		CRDInstallOptions:     envtest.CRDInstallOptions{MaxTime: startTimeout},
	}
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
		env.ControlPlaneStartTimeout = startTimeout
	}
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_STOP_TIMEOUT") == "" {
		env.ControlPlaneStopTimeout = time.Minute
	}
	return env
}

// Start starts etcd and kube-apiserver with the CRDs of config/crd/bases
// installed. Stop the returned environment when done.
func Start() (*envtest.Environment, error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	env := environment(assets)
	if _, err := env.Start(); err != nil {
		// Start may fail after etcd and the apiserver are up (a CRD the
		// server refuses, say); stop them so no process outlives the test.
		_ = env.Stop()
		return nil, fmt.Errorf("starting envtest from %s: %w", assets, err)
	}
	return env, nil
}
