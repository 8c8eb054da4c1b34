package crd

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// etcdObjectLimit is the largest object etcd stores by default (1.5 MiB,
// its request limit): spec, status and metadata together.
const etcdObjectLimit = 3 << 19

// specBudget is what the schema may admit for the spec: a quarter of the
// limit stays for status, metadata and Helm values.
const specBudget = etcdObjectLimit * 3 / 4

// minHeadroom is what the whole object (spec, Helm values, status and the
// metadata allowance, each at the worst the CRD and the operator admit)
// must leave of etcd's limit: room for annotations (the API server allows
// 256 KiB of them), managedFields of more appliers than one, and the
// fields a future release adds.
const minHeadroom = 300_000

// metadataAllowance is the object's metadata as devloop and one applier
// write it: name, labels, devloop's annotations and finalizer, and
// managedFields (which list the fields set, not their values). Beyond
// that is what minHeadroom is for.
const metadataAllowance = 16 << 10

// freeForm are the only fields whose size the schema cannot bound: Helm
// values are arbitrary YAML. The operator bounds them instead: all
// components' values together, as JSON, at most v1alpha1.MaxHelmValues
// bytes (internal/plan stalls a spec with more), counted once below.
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
	"spec.components[].health.ignore[]":     {"healthIgnore", 8},
	// Every image may be live-updatable; a CEL total bounds their paths
	// and command arguments together (one item size: both at most 64).
	"spec.components[].images[].liveUpdate":           {"liveUpdates", 16},
	"spec.components[].images[].liveUpdate.paths[]":   {"liveArgs", 48},
	"spec.components[].images[].liveUpdate.command[]": {"liveArgs", 48},
	// env entries, command arguments and envFrom entries: a CEL total each
	// across run steps, images' config and test suites.
	"spec.components[].images[].env[]":         {"env", 48},
	"spec.components[].images[].run.env[]":     {"env", 48},
	"spec.tests[].env[]":                       {"env", 48},
	"spec.components[].images[].run.command[]": {"command", 96},
	"spec.tests[].command[]":                   {"command", 96},
	"spec.components[].images[].run.envFrom[]": {"envFrom", 16},
	"spec.tests[].envFrom[]":                   {"envFrom", 16},

	// The status's totals (CEL on status.components and status.tests,
	// kept by the engines and Bound: api/v1alpha1/status_totals.go).
	"status.components[].images[]":             {"statusImages", v1alpha1.MaxStatusImages},
	"status.components[].inventory[]":          {"inventory", v1alpha1.MaxInventory},
	"status.components[].release.workloads[]":  {"workloads", v1alpha1.MaxWorkloads},
	"status.components[].waitingFor[]":         {"waitingFor", v1alpha1.MaxWaitingFor},
	"status.components[].drift[]":              {"drift", v1alpha1.MaxDrift},
	"status.tests[].runs[]":                    {"runs", v1alpha1.MaxRuns},
	"status.tests[].runs[].images{}":           {"runImages", v1alpha1.MaxRunImages},
	"status.tests[].runs[].params[]":           {"runParams", v1alpha1.MaxRunParams},
	"status.tests[].runs[].results.failures[]": {"resultNames", v1alpha1.MaxResultNames},
	"status.tests[].runs[].results.flaky[]":    {"resultNames", v1alpha1.MaxResultNames},
}

// sharedText are strings whose characters a CEL rule totals across the
// environment: each counts its quotes, the total is added once.
var sharedText = map[string]budget{
	"status.components[].message":                       {"componentMessages", v1alpha1.MaxComponentMessages},
	"status.components[].inventory[].group":             {"inventoryText", v1alpha1.MaxInventoryText},
	"status.components[].inventory[].version":           {"inventoryText", v1alpha1.MaxInventoryText},
	"status.components[].inventory[].kind":              {"inventoryText", v1alpha1.MaxInventoryText},
	"status.components[].inventory[].namespace":         {"inventoryText", v1alpha1.MaxInventoryText},
	"status.components[].inventory[].name":              {"inventoryText", v1alpha1.MaxInventoryText},
	"status.components[].release.workloads[].group":     {"workloadsText", v1alpha1.MaxWorkloadsText},
	"status.components[].release.workloads[].version":   {"workloadsText", v1alpha1.MaxWorkloadsText},
	"status.components[].release.workloads[].kind":      {"workloadsText", v1alpha1.MaxWorkloadsText},
	"status.components[].release.workloads[].namespace": {"workloadsText", v1alpha1.MaxWorkloadsText},
	"status.components[].release.workloads[].name":      {"workloadsText", v1alpha1.MaxWorkloadsText},
	"status.tests[].runs[].logTail":                     {"logTails", v1alpha1.MaxRunLogTails},
}

// ruleBounded are strings of a type devloop does not own
// (metav1.Condition: 32768 characters of message) that a CEL rule on the
// list bounds further; the rule must be in the CRD as written.
var ruleBounded = map[string]int{
	"status.conditions[].type":    64,
	"status.conditions[].reason":  128,
	"status.conditions[].message": v1alpha1.MaxConditionMessage,
}

// conditionsRule is the rule as it must stand in the CRD, built from the
// bounds above so that the schema, the walk and Bound agree.
var conditionsRule = fmt.Sprintf("self.all(c, size(c.type) <= %d && size(c.reason) <= %d && size(c.message) <= %d)",
	ruleBounded["status.conditions[].type"], ruleBounded["status.conditions[].reason"], ruleBounded["status.conditions[].message"])

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
// stay under its budget, and spec, Helm values, status and metadata
// together at least minHeadroom under etcd's limit. The figures are
// logged for docs/features.md and docs/figures.md.
func TestObjectSizeBounded(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "devloop.dev_devenvironments.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(yaml.Unmarshal(data, crd)).To(Succeed())
	root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	spec, status := root.Properties["spec"], root.Properties["status"]

	w := &sizeWalker{budgets: map[string]int{}, texts: map[string]int{}}
	specWorst := w.size("spec", &spec) + w.totals(t, "spec.")
	statusWorst := w.size("status", &status)
	for _, name := range slices.Sorted(maps.Keys(status.Properties)) {
		p := status.Properties[name]
		if n := w.size("status."+name, &p); n > 10000 {
			t.Logf("status.%s at most %d bytes, its totals apart", name, n)
		}
	}
	statusWorst += w.totals(t, "status.")

	g.Expect(w.unbounded).To(BeEmpty(), "fields without maxItems/maxLength")
	g.Expect(w.budgets).To(HaveLen(len(perEnvironment)), "every per-environment list is in the schema")
	g.Expect(w.texts).To(HaveLen(len(sharedText)), "every string with a shared total is in the schema")
	for path, m := range boundedMaps {
		g.Expect(w.maps).To(ContainElement(path), "the bounded map %s is in the schema", path)
		g.Expect(w.rules[path]).To(ContainElement(m.rule), "the rule bounding %s is in the schema", path)
	}
	g.Expect(rulesOf(status.Properties["conditions"])).To(ContainElement(conditionsRule), "the rule bounding conditions is in the schema")

	values := v1alpha1.MaxHelmValues
	total := specWorst + values + statusWorst + metadataAllowance
	t.Logf("worst-case spec: %d bytes (%.0f%% of etcd's %d); %d bytes under its budget of %d", specWorst, 100*float64(specWorst)/etcdObjectLimit, etcdObjectLimit, specBudget-specWorst, specBudget)
	t.Logf("Helm values: at most %d bytes in an environment", values)
	t.Logf("worst-case status: %d bytes", statusWorst)
	t.Logf("metadata allowance: %d bytes", metadataAllowance)
	t.Logf("worst-case object (spec, values, status, metadata): %d bytes; headroom to etcd's limit: %d bytes", total, etcdObjectLimit-total)
	g.Expect(specWorst).To(BeNumerically("<", specBudget), "a valid spec could come near the object size limit")
	g.Expect(etcdObjectLimit-total).To(BeNumerically(">=", minHeadroom), "spec, values, status and metadata leave less than %d bytes of etcd's limit", minHeadroom)
}

// totals adds, for the walked paths under prefix, each per-environment
// list once per item the environment allows and each shared text total
// once.
func (w *sizeWalker) totals(t *testing.T, prefix string) int {
	largest := map[string]int{}
	for path, n := range w.budgets {
		if !strings.HasPrefix(path, prefix) {
			continue
		}
		b := perEnvironment[path]
		largest[b.group] = max(largest[b.group], b.items*(n+1))
		t.Logf("one %s at most %d bytes, %d %s in an environment", path, n, b.items, b.group)
	}
	for path := range w.texts {
		if strings.HasPrefix(path, prefix) {
			b := sharedText[path]
			largest[b.group] = b.items
		}
	}
	sum := 0
	for _, n := range largest {
		sum += n
	}
	return sum
}

func rulesOf(s apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	for _, r := range s.XValidations {
		out = append(out, r.Rule)
	}
	return out
}

type sizeWalker struct {
	// budgets holds the size of one item of each perEnvironment list, left
	// out of the walk and added once per item the environment allows.
	budgets map[string]int
	// texts are the sharedText strings met.
	texts     map[string]int
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
	if _, ok := sharedText[path]; ok && s.Type == "string" {
		w.texts[path]++
		return 2
	}
	if n, ok := ruleBounded[path]; ok && s.Type == "string" {
		return n + 2
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
			entry := m.key + m.value + 6
			if _, ok := perEnvironment[path+"{}"]; ok {
				w.budgets[path+"{}"] = entry
				return 2
			}
			return 2 + int(*s.MaxProperties)*entry
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
