package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/devloop-dev/devloop/internal/deploy/helm"
	"github.com/devloop-dev/devloop/internal/fault"
)

// manifestExtensions are the files a plain directory contributes.
var manifestExtensions = []string{".yaml", ".yml", ".json"}

// Render reads the objects of a manifests component from dir, a fetched
// source: each of paths (relative to dir; dir itself when empty) is a YAML
// or JSON file, a directory of them (not recursive, in name order), or a
// kustomize directory, built with remote resources refused and without
// leaving dir. Namespaced objects that name no namespace get namespace;
// mapper tells which kinds are namespaced, and CRDs in the same set count
// as known. Problems with the content are fault.Permanent and name the file.
//
// Render keeps no kustomize build: the deploy engine renders through
// Engine.renderManifests, which remembers its own.
func Render(dir string, paths []string, namespace string, mapper meta.RESTMapper) ([]*unstructured.Unstructured, error) {
	return render(dir, paths, namespace, mapper, nil)
}

// render is Render with builds, when not nil, remembering kustomize
// builds by their directory (see buildCache).
func render(dir string, paths []string, namespace string, mapper meta.RESTMapper, builds *buildCache) ([]*unstructured.Unstructured, error) {
	root, err := filepath.Abs(dir)
	if err == nil {
		root, err = filepath.EvalSymlinks(root)
	}
	if err != nil {
		return nil, fmt.Errorf("manifests source: %w", err)
	}
	if len(paths) == 0 {
		paths = []string{"."}
	}
	var objs []*unstructured.Unstructured
	for _, p := range paths {
		got, err := renderPath(root, p, builds)
		if err != nil {
			return nil, err
		}
		objs = append(objs, got...)
	}
	for _, o := range objs {
		// Read as kubectl reads a manifest: `key: null` is no key, for
		// the patches and image pinning that follow as for the apply.
		helm.DropNulls(o.Object)
	}
	if err := checkUnique(objs); err != nil {
		return nil, err
	}
	if err := defaultNamespaces(objs, namespace, mapper); err != nil {
		return nil, err
	}
	return objs, nil
}

// renderPath renders one entry of paths.
func renderPath(root, p string, builds *buildCache) ([]*unstructured.Unstructured, error) {
	abs, err := insideRoot(root, filepath.Join(root, p))
	if err != nil {
		return nil, fault.Permanentf("manifests path %s: %v", p, err)
	}
	info, err := os.Stat(abs)
	if err != nil {
		return nil, fault.Permanentf("manifests path %s: not found in the source", p)
	}
	if !info.IsDir() {
		return readManifestFile(root, abs)
	}
	if kustomizationFile(abs) != "" {
		return buildKustomization(root, abs, builds)
	}
	entries, err := os.ReadDir(abs)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, e := range entries { // ReadDir sorts by name
		if e.IsDir() || !slices.Contains(manifestExtensions, strings.ToLower(filepath.Ext(e.Name()))) {
			continue
		}
		got, err := readManifestFile(root, filepath.Join(abs, e.Name()))
		if err != nil {
			return nil, err
		}
		objs = append(objs, got...)
	}
	return objs, nil
}

// Errors of insideRoot.
var (
	errNotInSource  = errors.New("not found in the source")
	errLeavesSource = errors.New("leaves the source")
)

// insideRoot resolves symlinks in path and refuses a result outside root.
func insideRoot(root, path string) (string, error) {
	resolved, err := filepath.EvalSymlinks(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", errNotInSource
	}
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(root, resolved)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", errLeavesSource
	}
	return resolved, nil
}

// readManifestFile decodes every document of a YAML or JSON file.
func readManifestFile(root, path string) ([]*unstructured.Unstructured, error) {
	rel, _ := filepath.Rel(root, path)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fault.Permanentf("%s: %v", rel, err)
	}
	objs, err := decodeObjects(data)
	if err != nil {
		return nil, fault.Permanentf("%s: %v", rel, err)
	}
	return objs, nil
}

// decodeObjects splits a multi-document stream into objects, skipping
// empty documents and expanding v1 Lists. Decoding goes through JSON so
// numbers are int64, as unstructured code expects.
func decodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for doc := 1; ; doc++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		if t := bytes.TrimSpace(raw); len(t) == 0 || bytes.Equal(t, []byte("null")) || bytes.Equal(t, []byte("{}")) {
			continue
		}
		decoded, _, err := unstructured.UnstructuredJSONScheme.Decode(raw, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		switch o := decoded.(type) {
		case *unstructured.UnstructuredList:
			for i := range o.Items {
				objs = append(objs, &o.Items[i])
			}
		case *unstructured.Unstructured:
			if err := checkObject(o); err != nil {
				return nil, fmt.Errorf("document %d: %w", doc, err)
			}
			objs = append(objs, o)
		}
	}
}

// checkObject refuses documents the API server could not take.
func checkObject(u *unstructured.Unstructured) error {
	switch {
	case u.GetAPIVersion() == "":
		return errors.New("apiVersion is missing")
	case u.GetKind() == "":
		return errors.New("kind is missing")
	case u.GetName() == "":
		return fmt.Errorf("%s has no metadata.name (generateName cannot be applied)", u.GetKind())
	}
	return nil
}

// checkUnique refuses the same object twice: server-side apply would apply
// the second over the first and the inventory would hold one.
func checkUnique(objs []*unstructured.Unstructured) error {
	seen := map[ObjRef]bool{}
	for _, o := range objs {
		if err := checkObject(o); err != nil {
			return fault.Permanent(err)
		}
		ref := RefOf(o)
		ref.Version = ""
		if seen[ref] {
			return fault.Permanentf("%s is defined twice", ref)
		}
		seen[ref] = true
	}
	return nil
}

// defaultNamespaces gives namespaced objects without one namespace, and
// takes it away from cluster-scoped objects that name one.
func defaultNamespaces(objs []*unstructured.Unstructured, namespace string, mapper meta.RESTMapper) error {
	local := map[schema.GroupKind]bool{} // kinds of CRDs in the set -> namespaced
	for _, o := range objs {
		if isCRD(o) {
			group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
			scope, _, _ := unstructured.NestedString(o.Object, "spec", "scope")
			local[schema.GroupKind{Group: group, Kind: kind}] = scope == string(apiextensionsv1.NamespaceScoped)
		}
	}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		namespaced, ok := local[gvk.GroupKind()]
		if !ok {
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if meta.IsNoMatchError(err) {
				return fault.Permanentf("%s %s: the cluster does not serve %s; install its CRD first (a component this one dependsOn)", gvk.Kind, o.GetName(), gvk.GroupVersion())
			}
			if err != nil {
				return fault.Unavailable(fmt.Errorf("looking up %s: %w", gvk, err))
			}
			namespaced = m.Scope.Name() == meta.RESTScopeNameNamespace
		}
		switch {
		case !namespaced:
			o.SetNamespace("")
		case o.GetNamespace() == "":
			o.SetNamespace(namespace)
		}
	}
	return nil
}

func isCRD(o *unstructured.Unstructured) bool {
	return o.GetKind() == "CustomResourceDefinition" && o.GroupVersionKind().Group == apiextensionsv1.GroupName
}
