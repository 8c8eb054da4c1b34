package helper

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/image"
	"github.com/devloop-dev/devloop/internal/pods"
	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/internal/testfiles"
	"github.com/devloop-dev/devloop/internal/testregistry"
)

// pushedSource starts an in-memory registry, pushes files there as the
// source app, as `kubectl devloop push` leaves it (host/team/src:dev), and
// resolves it as the operator would: the registry's host and the ref a
// build is given.
func pushedSource(t *testing.T, files map[string]string) (string, source.Ref) {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()
	if _, err := source.PushDir(ctx, testfiles.Tree(t, files), host+"/team/src:dev", true); err != nil {
		t.Fatal(err)
	}
	spec := v1alpha1.Source{Name: "app", OCI: &v1alpha1.OCISource{Repository: host + "/team/src", Tag: "dev", Insecure: true}}
	ref, err := (&source.Fetcher{Root: t.TempDir()}).Resolve(ctx, "default", spec)
	if err != nil {
		t.Fatal(err)
	}
	return host, ref
}

// TestHelperFetchThenAssemble runs the two helper steps of a builder pod,
// with the arguments BuilderJob gives them, against a registry: fetch puts
// the resolved source in the workspace, a "build" writes its output there,
// and assemble pushes the image by digest and reports it.
func TestHelperFetchThenAssemble(t *testing.T) {
	host, ref := pushedSource(t, map[string]string{"cmd/main.go": "package main\n"})

	job, err := build.BuilderJob(build.JobRequest{
		Name: "b", Namespace: "default", HelperImage: "helper", Source: ref, Platform: "linux/arm64",
		Image: image.Spec{Name: "api", Platforms: []string{"linux/arm64"},
			Layers: []v1alpha1.LayerMapping{{From: "out/api", To: "/api", Mode: "0755"}}, Entrypoint: []string{"/api"}},
		Run:      v1alpha1.BuildRun{Image: "golang", Command: []string{"go", "build"}},
		Registry: image.Registry{Prefix: host + "/team", Insecure: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	workspace := t.TempDir()
	cache := t.TempDir()
	fetchArgs := withFlag(job.Spec.Template.Spec.InitContainers[0].Args, "--dest", workspace)
	fetchArgs = withFlag(fetchArgs, "--cache-root", cache)
	if err := runHelper(fetchArgs[1:]); err != nil {
		t.Fatalf("helper fetch: %v", err)
	}
	// The cache's subPath directories exist before the build container
	// mounts them, made by the build's user rather than by the kubelet.
	for _, d := range []string{"p0", "p1"} {
		if st, err := os.Stat(filepath.Join(cache, d)); err != nil || !st.IsDir() {
			t.Errorf("cache directory %s: %v", d, err)
		}
	}
	if got, err := os.ReadFile(filepath.Join(workspace, "cmd", "main.go")); err != nil || string(got) != "package main\n" {
		t.Fatalf("workspace after fetch: %q, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(workspace, ".devloop-store")); !os.IsNotExist(err) {
		t.Fatalf("the fetch store is left in the workspace: %v", err)
	}

	// What the build container would write.
	if err := os.MkdirAll(filepath.Join(workspace, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(workspace, "out", "api"), []byte("\x7fELF binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(t.TempDir(), "termination-log")
	assembleArgs := withFlag(job.Spec.Template.Spec.Containers[0].Args, "--dir", workspace)
	assembleArgs = append(assembleArgs, "--termination-log", report)
	if err := runHelper(assembleArgs[1:]); err != nil {
		t.Fatalf("helper assemble: %v", err)
	}
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var r build.AssembleReport
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("termination message %q: %v", data, err)
	}
	// The reported digest is in the registry.
	img := testregistry.Pull(t, host+"/team/api@"+r.Digest)
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Architecture != "arm64" || cfg.OS != "linux" {
		t.Errorf("platform %s/%s, want linux/arm64", cfg.OS, cfg.Architecture)
	}
	if len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/api" {
		t.Errorf("entrypoint %v", cfg.Config.Entrypoint)
	}
	repo, err := name.NewRepository(host+"/team/api", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	tags, err := remote.List(repo)
	if err != nil {
		t.Fatal(err)
	}
	if len(tags) != 0 {
		t.Errorf("assemble moved tags %v; tags are the operator's, after every platform is pushed", tags)
	}
}

// withFlag replaces a flag's value in args (a pod path by a test path).
func withFlag(args []string, flag, value string) []string {
	out := append([]string(nil), args...)
	for i := range out {
		if out[i] == flag && i+1 < len(out) {
			out[i+1] = value
		}
	}
	return out
}

// runHelper runs a step as `manager helper` does: the fetch step is the
// one builder and test pods share (pods.FetchStep), the others are Run's.
func runHelper(args []string) error {
	if len(args) > 0 && args[0] == "fetch" {
		return pods.FetchStep(context.Background(), args[1:])
	}
	return Run(context.Background(), args)
}
