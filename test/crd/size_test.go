package crd

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/internal/testenv"
)

// etcdObjectLimit is the largest object etcd stores by default (1.5 MiB,
// its request limit): spec, status and metadata together.
const etcdObjectLimit = 3 << 19

// specBudget is what the schema may admit for the spec: a quarter of the
// limit stays for status, metadata and Helm values.
const specBudget = etcdObjectLimit * 3 / 4

// freeForm are the only fields whose size the schema cannot bound: Helm
// values are arbitrary YAML. They, and metadata, live in what the bounded
// fields leave of the limit (the headroom this test reports).
var freeForm = map[string]bool{"spec.components[].helm.values": true}

// perEnvironment are lists with a CEL rule bounding their total across
// the environment; the schema walk alone would multiply components (or
// tests) by items per list. Each is sized once per item allowed in the
// environment.
var perEnvironment = map[string]budget{
	"spec.components[].images[]":            {"images", 16},
	"spec.components[].helm.patches[]":      {"patches", 16},
	"spec.components[].manifests.patches[]": {"patches", 16},
	"spec.components[].ports[]":             {"ports", 16},
	"spec.components[].images[].liveUpdate": {"liveUpdates", 2},
	// env entries, command arguments and envFrom entries: a CEL total each
	// across run steps, images' config and test suites.
	"spec.components[].images[].env[]":         {"env", 48},
	"spec.components[].images[].run.env[]":     {"env", 48},
	"spec.tests[].env[]":                       {"env", 48},
	"spec.components[].images[].run.command[]": {"command", 96},
	"spec.tests[].command[]":                   {"command", 96},
	"spec.components[].images[].run.envFrom[]": {"envFrom", 16},
	"spec.tests[].envFrom[]":                   {"envFrom", 16},
}

// budget is how many items of a group (lists sharing one CEL total, like
// helm and manifests patches) an environment may hold.
type budget struct {
	group string
	items int
}

// exclusive are sibling fields the CRD allows only one of (a component has
// helm or manifests): only the larger counts.
var exclusive = map[string][2]string{"spec.components[]": {"helm", "manifests"}}

// boundedMaps are maps whose keys and values a CEL rule bounds (a schema
// bounds only how many entries): the rule must be in the CRD as written.
var boundedMaps = map[string]struct {
	key, value int
	rule       string
}{
	"status.tests[].runs[].images": {63, 80, "self.all(k, size(k) <= 63 && size(self[k]) <= 80)"},
}

// TestObjectSizeBounded walks the generated CRD schema and computes the
// largest serialized spec and status it admits. Every list and string
// must be bounded (apart from the named free-form values); the spec must
// stay under its budget. The figures are logged for docs/performance.md.
func TestObjectSizeBounded(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "devloop.dev_devenvironments.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(yaml.Unmarshal(data, crd)).To(Succeed())
	root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	spec, status := root.Properties["spec"], root.Properties["status"]

	w := &sizeWalker{budgets: map[string]int{}}
	specWorst := w.size("spec", &spec)
	largest := map[string]int{}
	for path, n := range w.budgets {
		b := perEnvironment[path]
		largest[b.group] = max(largest[b.group], b.items*(n+1))
		t.Logf("one %s at most %d bytes, %d %s in an environment", path, n, b.items, b.group)
	}
	for _, n := range largest {
		specWorst += n
	}
	statusWorst := w.size("status", &status)
	for _, name := range slices.Sorted(maps.Keys(status.Properties)) {
		p := status.Properties[name]
		if n := w.size("status."+name, &p); n > 10000 {
			t.Logf("status.%s at most %d bytes", name, n)
		}
	}

	g.Expect(w.unbounded).To(BeEmpty(), "fields without maxItems/maxLength")
	g.Expect(w.budgets).To(HaveLen(len(perEnvironment)), "every per-environment list is in the schema")
	for path, m := range boundedMaps {
		g.Expect(w.maps).To(ContainElement(path), "the bounded map %s is in the schema", path)
		g.Expect(w.rules[path]).To(ContainElement(m.rule), "the rule bounding %s is in the schema", path)
	}

	total := specWorst + statusWorst
	t.Logf("worst-case spec: %d bytes (%.0f%% of etcd's %d); %d bytes under its budget of %d", specWorst, 100*float64(specWorst)/etcdObjectLimit, etcdObjectLimit, specBudget-specWorst, specBudget)
	t.Logf("worst-case status: %d bytes", statusWorst)
	t.Logf("worst-case spec+status: %d bytes; headroom for Helm values and metadata: %d bytes", total, etcdObjectLimit-total)
	g.Expect(specWorst).To(BeNumerically("<", specBudget), "a valid spec could come near the object size limit")
	// Not asserted yet (issue 30): spec+status under the limit with 300 kB
	// to spare. The status admits far more than the limit — per component
	// 256 inventory entries, 64 workloads and 8 images, per suite 10 runs
	// — until the status gets per-environment totals, as the spec has,
	// that the deploy and test engines keep to.
}

type sizeWalker struct {
	// budgets holds the size of one item of each perEnvironment list, left
	// out of the walk and added once per item the environment allows.
	budgets   map[string]int
	unbounded []string
	// maps are the boundedMaps met, with the CEL rules of each.
	maps  []string
	rules map[string][]string
}

// size is the longest JSON the schema at path admits.
func (w *sizeWalker) size(path string, s *apiextensionsv1.JSONSchemaProps) int {
	if freeForm[path] {
		return 0
	}
	if _, ok := perEnvironment[path]; ok {
		w.budgets[path] = w.sizeOf(path, s)
		return 0
	}
	return w.sizeOf(path, s)
}

func (w *sizeWalker) sizeOf(path string, s *apiextensionsv1.JSONSchemaProps) int {
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
			m, ok := boundedMaps[path]
			if !ok || s.MaxProperties == nil {
				w.unbounded = append(w.unbounded, path)
				return 0
			}
			w.maps = append(w.maps, path)
			if w.rules == nil {
				w.rules = map[string][]string{}
			}
			for _, r := range s.XValidations {
				w.rules[path] = append(w.rules[path], r.Rule)
			}
			// "key": "value", per entry.
			return 2 + int(*s.MaxProperties)*(m.key+m.value+6)
		}
		n := 2
		either := map[string]int{}
		for name, p := range s.Properties {
			p := p
			m := len(name) + 4 + w.size(path+"."+name, &p)
			if pair, ok := exclusive[path]; ok && (name == pair[0] || name == pair[1]) {
				either[name] = m
				continue
			}
			n += m
		}
		if pair, ok := exclusive[path]; ok {
			n += max(either[pair[0]], either[pair[1]])
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
