package devcluster

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/types"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/devloop-dev/devloop/internal/testfiles"
	"github.com/devloop-dev/devloop/internal/testregistry"
)

// TestFluxArtifactIsWhatSourceControllerExtracts pushes a tree with
// PushFluxArtifact to a real registry and reads it back as
// source-controller does: an OCI manifest with Flux's config media type,
// one layer of Flux's content media type that is a tar+gzip of the tree.
// The same tree pushes the same digest; a changed file another.
func TestFluxArtifactIsWhatSourceControllerExtracts(t *testing.T) {
	ctx := context.Background()
	host := testregistry.Start(t)
	dir := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("env/hello.yaml", "kind: DevEnvironment\n")
	write("app/configmap.yaml", "kind: ConfigMap\n")
	ref := host + "/team/config:latest"

	first, err := PushFluxArtifact(ctx, dir, ref, "v1")
	if err != nil {
		t.Fatal(err)
	}
	img := testregistry.Pull(t, ref)
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != FluxConfigMediaType {
		t.Errorf("manifest %s with config %s, want %s with %s", m.MediaType, m.Config.MediaType, types.OCIManifestSchema1, FluxConfigMediaType)
	}
	if len(m.Layers) != 1 || m.Layers[0].MediaType != FluxContentMediaType {
		t.Fatalf("layers %+v, want one of %s", m.Layers, FluxContentMediaType)
	}
	if m.Annotations["org.opencontainers.image.revision"] != "v1" {
		t.Errorf("annotations %v, want the revision v1", m.Annotations)
	}
	layers, _ := img.Layers()
	blob, err := layers[0].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer blob.Close()
	zr, err := gzip.NewReader(blob)
	if err != nil {
		t.Fatalf("the layer is not gzip: %v", err)
	}
	files := map[string]string{}
	for _, e := range testfiles.ReadTar(t, zr) {
		if e.Typeflag == tar.TypeReg {
			files[e.Name] = e.Content
		}
	}
	if files["env/hello.yaml"] != "kind: DevEnvironment\n" || files["app/configmap.yaml"] != "kind: ConfigMap\n" || len(files) != 2 {
		t.Errorf("layer files %v, want the two written", files)
	}

	again, err := PushFluxArtifact(ctx, dir, ref, "v1")
	if err != nil {
		t.Fatal(err)
	}
	if again != first {
		t.Errorf("the same tree pushed %s, then %s", first, again)
	}
	write("app/configmap.yaml", "kind: ConfigMap\ndata: {a: b}\n")
	changed, err := PushFluxArtifact(ctx, dir, ref, "v1")
	if err != nil {
		t.Fatal(err)
	}
	if changed == first {
		t.Errorf("a changed file pushed the same digest %s", first)
	}
}

// TestFluxInstallObjects checks the rendered install where a mistake only
// shows on a cluster: artifacts advertised at the Service's cluster DNS
// name, the Service targeting the port source-controller serves them on,
// each image as given, and kustomize-controller allowed to impersonate
// ServiceAccounts and nothing more beyond its module's role.
func TestFluxInstallObjects(t *testing.T) {
	f := &Flux{
		SourceController:    FluxController{Name: "source-controller", Version: "1.8.0", Image: "reg/flux/source-controller@sha256:1"},
		KustomizeController: FluxController{Name: "kustomize-controller", Version: "1.7.3", Image: "reg/flux/kustomize-controller@sha256:2"},
	}
	objs, err := fluxObjects(f)
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		byKey[o.GetKind()+"/"+o.GetName()] = o
	}
	container := func(deployment string) map[string]any {
		t.Helper()
		d := byKey["Deployment/"+deployment]
		if d == nil {
			t.Fatalf("no Deployment %s in %v", deployment, slices.Sorted(maps.Keys(byKey)))
		}
		cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		return cs[0].(map[string]any)
	}
	src := container("source-controller")
	if src["image"] != f.SourceController.Image {
		t.Errorf("source-controller image %v", src["image"])
	}
	args, _, _ := unstructured.NestedStringSlice(src, "args")
	if !slices.Contains(args, "--storage-adv-addr=source-controller.flux-system.svc.cluster.local.") || !slices.Contains(args, "--storage-path=/data") {
		t.Errorf("source-controller args %v", args)
	}
	ports, _, _ := unstructured.NestedSlice(byKey["Service/source-controller"].Object, "spec", "ports")
	cports, _, _ := unstructured.NestedSlice(src, "ports")
	if ports[0].(map[string]any)["targetPort"] != "http" || cports[0].(map[string]any)["name"] != "http" {
		t.Errorf("Service ports %v, container ports %v", ports, cports)
	}
	if container("kustomize-controller")["image"] != f.KustomizeController.Image {
		t.Errorf("kustomize-controller image %v", container("kustomize-controller")["image"])
	}
	rules, _, _ := unstructured.NestedSlice(byKey["ClusterRole/flux-kustomize-controller-impersonate"].Object, "rules")
	want := []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"serviceaccounts"}, "verbs": []any{"impersonate"}}}
	if !reflect.DeepEqual(rules, want) {
		t.Errorf("impersonation rules %v", rules)
	}
	for _, name := range []string{"ClusterRoleBinding/flux-source-controller", "ClusterRoleBinding/flux-kustomize-controller", "Namespace/flux-system"} {
		if byKey[name] == nil {
			t.Errorf("no %s", name)
		}
	}
}
