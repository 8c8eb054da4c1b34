package helm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"helm.sh/helm/v3/pkg/postrender"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Mutator edits the objects of a rendered release in place, e.g. to
// rewrite image references to the images devloop built.
type Mutator func(objs []*unstructured.Unstructured) error

// EditPostRenderer adapts an edit of the rendered objects to Helm's
// post-renderer: Helm hands over the rendered manifests as one
// multi-document YAML stream, which is parsed into objects, edited (some
// may be left out), and serialized back.
type EditPostRenderer struct {
	Edit func(objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error)
}

var _ postrender.PostRenderer = EditPostRenderer{}

// Run implements postrender.PostRenderer.
func (p EditPostRenderer) Run(rendered *bytes.Buffer) (*bytes.Buffer, error) {
	objs, err := parseManifests(rendered.Bytes())
	if err != nil {
		return nil, fmt.Errorf("post-render: %w", err)
	}
	if p.Edit != nil {
		if objs, err = p.Edit(objs); err != nil {
			return nil, fmt.Errorf("post-render: %w", err)
		}
	}
	out, err := writeManifests(objs)
	if err != nil {
		return nil, fmt.Errorf("post-render: %w", err)
	}
	return out, nil
}

// writeManifests serializes objs as one multi-document YAML stream.
func writeManifests(objs []*unstructured.Unstructured) (*bytes.Buffer, error) {
	out := new(bytes.Buffer)
	for _, o := range objs {
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			return nil, fmt.Errorf("serializing %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		out.WriteString("---\n")
		out.Write(b)
	}
	return out, nil
}

// parseManifests splits a multi-document YAML stream into objects,
// skipping empty documents (templates that rendered to nothing), with
// null map entries dropped as Helm and kubectl read them (DropNulls).
func parseManifests(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []*unstructured.Unstructured
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading document %d: %w", i, err)
		}
		m := map[string]any{}
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("parsing document %d: %w", i, err)
		}
		DropNulls(m)
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}
