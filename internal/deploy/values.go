package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
)

// ImageRef is an image a component built and pushed, as ImageValue can
// write it into values.
type ImageRef struct {
	// Repository is where the image was pushed (as nodes pull it), e.g.
	// localhost:5001/team-a/controller.
	Repository string
	// Tag is the content tag the Deployment uses.
	Tag string
	// Digest is the manifest (or index) digest, "sha256:<hex>".
	Digest string
	// Revision is the tag made from the source revision; empty when the
	// image has none.
	Revision string
	// Registry is the prefix Repository sits under as nodes pull it
	// (registry.pullPrefix, else registry.prefix), e.g.
	// localhost:5001/team-a; Name is the image's name in the spec, which
	// may hold '/'. Registry + "/" + Name is Repository.
	Registry string
	Name     string
}

// Reference is repository@digest, the immutable reference.
func (b ImageRef) Reference() string { return b.Repository + "@" + b.Digest }

// Part returns the part ImageValue.From names; empty from means Reference.
func (b ImageRef) Part(from string) (string, error) {
	var v string
	switch from {
	case "", "Reference":
		if b.Repository != "" && b.Digest != "" {
			v = b.Reference()
		}
	case "Repository":
		v = b.Repository
	case "Tag":
		v = b.Tag
	case "Digest":
		v = b.Digest
	case "Revision":
		v = b.Revision
	case "Registry":
		v = b.Registry
	case "Name":
		v = b.Name
	default:
		return "", fault.Permanentf("unknown image part %q: want Reference, Repository, Tag, Digest, Revision, Registry or Name", from)
	}
	if v == "" {
		return "", fault.Permanentf("image %s has no %s", b.Repository, strings.ToLower(orDefault(from, "Reference")))
	}
	return v, nil
}

// ComposeValues layers a release's values, last wins: each of valuesFiles
// in order (read by files), spec.values, each valuesFrom document in
// order, then imageValues. Chart defaults sit under all of them; Helm
// coalesces those itself when it renders. images maps image names to
// what was built. ConfigMaps and Secrets are read from namespace.
func ComposeValues(ctx context.Context, r client.Reader, namespace string, spec *v1alpha1.HelmSpec, images map[string]ImageRef, files ValuesFiles) (map[string]any, error) {
	vals, err := files.compose(spec.ValuesFiles)
	if err != nil {
		return nil, err
	}
	if spec.Values != nil && len(spec.Values.Raw) > 0 {
		inline := map[string]any{}
		if err := json.Unmarshal(spec.Values.Raw, &inline); err != nil {
			return nil, fault.Permanentf("values: %w", err)
		}
		vals = MergeValues(vals, inline)
	}
	for _, ref := range spec.ValuesFrom {
		doc, err := readValuesRef(ctx, r, namespace, ref)
		if err != nil {
			return nil, err
		}
		vals = MergeValues(vals, doc)
	}
	for _, iv := range spec.ImageValues {
		img, ok := images[iv.Image]
		if !ok {
			// The DAG deploys after builds; a missing image has simply
			// not been built yet, which retrying fixes.
			return nil, fmt.Errorf("imageValues: image %q has not been built yet", iv.Image)
		}
		v, err := img.Part(iv.From)
		if err != nil {
			return nil, fmt.Errorf("imageValues %s: %w", iv.Path, err)
		}
		if err := SetValue(vals, iv.Path, v); err != nil {
			return nil, err
		}
	}
	return vals, nil
}

// readValuesRef reads one valuesFrom document; a missing optional object
// or key yields no values.
func readValuesRef(ctx context.Context, r client.Reader, namespace string, ref v1alpha1.ValuesReference) (map[string]any, error) {
	key := orDefault(ref.Key, "values.yaml")
	name := client.ObjectKey{Namespace: namespace, Name: ref.Name}
	var (
		data  []byte
		found bool
		err   error
	)
	switch ref.Kind {
	case "ConfigMap":
		var cm corev1.ConfigMap
		if err = r.Get(ctx, name, &cm); err == nil {
			var s string
			if s, found = cm.Data[key]; found {
				data = []byte(s)
			} else {
				data, found = cm.BinaryData[key]
			}
		}
	case "Secret":
		var sec corev1.Secret
		if err = r.Get(ctx, name, &sec); err == nil {
			data, found = sec.Data[key]
		}
	default:
		return nil, fault.Permanentf("valuesFrom: unknown kind %q", ref.Kind)
	}
	switch {
	case apierrors.IsNotFound(err):
		if ref.Optional {
			return nil, nil
		}
		return nil, fault.Permanentf("valuesFrom: %s %s/%s not found", ref.Kind, namespace, ref.Name)
	case err != nil:
		return nil, fmt.Errorf("valuesFrom: reading %s %s/%s: %w", ref.Kind, namespace, ref.Name, err)
	case !found:
		if ref.Optional {
			return nil, nil
		}
		return nil, fault.Permanentf("valuesFrom: %s %s/%s has no key %q", ref.Kind, namespace, ref.Name, key)
	}
	doc := map[string]any{}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		// Only the location is named: a Secret's content never leaves it.
		return nil, fault.Permanentf("valuesFrom: %s %s/%s key %q is not a YAML map", ref.Kind, namespace, ref.Name, key)
	}
	return doc, nil
}

// MergeValues merges src into dst the way Helm merges values files: maps
// are merged key by key, anything else in src replaces what dst holds.
// dst is modified and returned.
func MergeValues(dst, src map[string]any) map[string]any {
	if dst == nil {
		dst = map[string]any{}
	}
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				dst[k] = MergeValues(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
	return dst
}

// SetValue writes v at a dotted path such as validator.version, creating
// maps on the way. A path crossing a value that is not a map is a
// permanent error: the spec and the values disagree.
func SetValue(vals map[string]any, path string, v any) error {
	keys := strings.Split(path, ".")
	m := vals
	for i, k := range keys[:len(keys)-1] {
		next, ok := m[k]
		if !ok || next == nil {
			nm := map[string]any{}
			m[k] = nm
			m = nm
			continue
		}
		nm, ok := next.(map[string]any)
		if !ok {
			return fault.Permanentf("values path %s: %s is a %T, not a map", path, strings.Join(keys[:i+1], "."), next)
		}
		m = nm
	}
	m[keys[len(keys)-1]] = v
	return nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
