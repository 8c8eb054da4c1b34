package crd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/internal/testenv"
)

// etcdObjectLimit is the largest object etcd stores by default (1.5 MiB).
const etcdObjectLimit = 3 << 19

// freeForm are the only fields whose size the schema cannot bound: Helm
// values are arbitrary YAML. The API server's request limit bounds them.
var freeForm = map[string]bool{"spec.components[].helm.values": true}

// imagesPerEnvironment is the CEL rule's total bound on images; the schema
// walk alone would multiply components by images per component.
const imagesPerEnvironment = 16

// TestSpecSizeBounded walks the generated CRD schema and computes the
// largest serialized spec it admits. Every list and string must be bounded
// (apart from the named free-form values), and the worst case must stay
// under the object size limit with room for metadata and status.
func TestSpecSizeBounded(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "devloop.dev_devenvironments.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(yaml.Unmarshal(data, crd)).To(Succeed())
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]

	w := &sizeWalker{skip: "spec.components[].images"}
	withoutImages := w.size("spec", &spec)
	image := spec.Properties["components"].Items.Schema.Properties["images"].Items.Schema
	perImage := w.size("spec.components[].images[]", image)
	worst := withoutImages + imagesPerEnvironment*(perImage+1)

	g.Expect(w.unbounded).To(BeEmpty(), "fields without maxItems/maxLength")
	t.Logf("worst-case spec: %d bytes (%.0f%% of etcd's %d); one image at most %d bytes", worst, 100*float64(worst)/etcdObjectLimit, etcdObjectLimit, perImage)
	g.Expect(worst).To(BeNumerically("<", etcdObjectLimit*3/4), "a valid spec could come near the object size limit")
}

type sizeWalker struct {
	skip      string
	unbounded []string
}

// size is the longest JSON the schema at path admits.
func (w *sizeWalker) size(path string, s *apiextensionsv1.JSONSchemaProps) int {
	if path == w.skip || freeForm[path] {
		return 0
	}
	switch {
	case s.XIntOrString:
		return 64 // quantities: the longest canonical form is far shorter
	case s.Type == "string":
		if s.MaxLength != nil {
			return int(*s.MaxLength) + 2
		}
		if n := longestEnum(s); n > 0 {
			return n + 2
		}
		if s.Format == "date-time" {
			return 32
		}
		w.unbounded = append(w.unbounded, path)
		return 0
	case s.Type == "integer", s.Type == "number":
		return 20
	case s.Type == "boolean":
		return 5
	case s.Type == "array":
		if s.MaxItems == nil {
			w.unbounded = append(w.unbounded, path)
			return 0
		}
		return 2 + int(*s.MaxItems)*(w.size(path+"[]", s.Items.Schema)+1)
	case s.Type == "object":
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			w.unbounded = append(w.unbounded, path)
			return 0
		}
		n := 2
		for name, p := range s.Properties {
			p := p
			n += len(name) + 4 + w.size(path+"."+name, &p)
		}
		return n
	}
	w.unbounded = append(w.unbounded, path+" (type "+s.Type+")")
	return 0
}

func longestEnum(s *apiextensionsv1.JSONSchemaProps) int {
	n := 0
	for _, e := range s.Enum {
		n = max(n, len(strings.Trim(string(e.Raw), `"`)))
	}
	return n
}
