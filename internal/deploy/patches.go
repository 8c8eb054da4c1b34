package deploy

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
)

// Patches are a component's render-time patches, checked and parsed once
// per reconcile. They are applied in spec order, each to the matching
// objects in the order they were rendered, so the same render always
// patches the same way. Applying is not idempotent (a JSON6902 add to a
// list adds again), so callers patch each freshly rendered object once.
type Patches struct {
	list []patch
	// namespace is the namespace of objects that name none (Helm puts
	// them in the release namespace when it applies them).
	namespace string
}

// patch is one spec.components[i].<kind>.patches[j].
type patch struct {
	field string
	sel   selector
	// merge is a strategic-merge patch as JSON, without the fields that
	// select the object; nil for a JSON6902 patch.
	merge []byte
	ops   jsonpatch.Patch
	// drop leaves the selected objects out of the render (`$patch:
	// delete`, as kustomize reads it): a cluster-scoped object another
	// release or environment owns, say.
	drop bool
}

// selector picks the objects a patch applies to. Empty fields (and nil
// ones) match anything; group only counts when hasGroup, since "" is the
// core group.
type selector struct {
	hasGroup             bool
	group, version, kind string
	name, namespace      *regexp.Regexp
	labels               labels.Selector
}

// CompilePatches parses specs; field is their place in the spec, e.g.
// spec.components[2].helm.patches, and namespace the namespace objects
// without one are deployed to. Errors are permanent and name the patch.
// No patches give nil.
func CompilePatches(field string, specs []v1alpha1.Patch, namespace string) (*Patches, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	ps := &Patches{namespace: namespace}
	for j, s := range specs {
		p, err := compilePatch(fmt.Sprintf("%s[%d]", field, j), s)
		if err != nil {
			return nil, err
		}
		ps.list = append(ps.list, p)
	}
	return ps, nil
}

func compilePatch(field string, s v1alpha1.Patch) (patch, error) {
	p := patch{field: field}
	js, err := yaml.YAMLToJSON([]byte(s.Patch))
	if err != nil {
		return p, fault.Permanentf("%s.patch: not YAML: %v", field, err)
	}
	var body any
	if err := utiljson.Unmarshal(js, &body); err != nil {
		return p, fault.Permanentf("%s.patch: %v", field, err)
	}
	if s.Target != nil {
		if p.sel, err = targetSelector(field+".target", s.Target); err != nil {
			return p, err
		}
	}
	switch body := body.(type) {
	case []any:
		if s.Target == nil {
			return p, fault.Permanentf("%s: a JSON6902 patch (a list of operations) needs target", field)
		}
		// DecodePatch checks each operation's op and path.
		if p.ops, err = jsonpatch.DecodePatch(js); err != nil {
			return p, fault.Permanentf("%s.patch: %v", field, err)
		}
	case map[string]any:
		if s.Target == nil {
			if p.sel, err = selfSelector(field, body); err != nil {
				return p, err
			}
		}
		// What selects the object is not merged into it: with a target,
		// one patch serves objects of several names.
		delete(body, "apiVersion")
		delete(body, "kind")
		if meta, ok := body["metadata"].(map[string]any); ok {
			delete(meta, "name")
			delete(meta, "namespace")
			if len(meta) == 0 {
				delete(body, "metadata")
			}
		}
		if directive, _ := body["$patch"].(string); directive == "delete" {
			if len(body) > 1 {
				return p, fault.Permanentf("%s.patch: $patch: delete leaves the object out and takes no other fields", field)
			}
			p.drop = true
			return p, nil
		}
		if p.merge, err = json.Marshal(body); err != nil {
			return p, fault.Permanentf("%s.patch: %v", field, err)
		}
	default:
		return p, fault.Permanentf("%s.patch: must be a partial object (a strategic-merge patch) or a list of JSON6902 operations", field)
	}
	return p, nil
}

// selfSelector selects the object a strategic-merge patch without target
// names: its kind and metadata.name, and its apiVersion and
// metadata.namespace when given (as kustomize's patches do).
func selfSelector(field string, body map[string]any) (selector, error) {
	var sel selector
	kind, _ := body["kind"].(string)
	meta, _ := body["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	if kind == "" || name == "" {
		return sel, fault.Permanentf("%s: a strategic-merge patch without target needs kind and metadata.name to select the object", field)
	}
	sel.kind = kind
	sel.name = regexp.MustCompile("^" + regexp.QuoteMeta(name) + "$")
	if ns, _ := meta["namespace"].(string); ns != "" {
		sel.namespace = regexp.MustCompile("^" + regexp.QuoteMeta(ns) + "$")
	}
	if av, _ := body["apiVersion"].(string); av != "" {
		gv, err := schema.ParseGroupVersion(av)
		if err != nil {
			return sel, fault.Permanentf("%s: apiVersion %q: %v", field, av, err)
		}
		sel.hasGroup, sel.group, sel.version = true, gv.Group, gv.Version
	}
	return sel, nil
}

func targetSelector(field string, t *v1alpha1.PatchTarget) (selector, error) {
	sel := selector{hasGroup: t.Group != "", group: t.Group, version: t.Version, kind: t.Kind}
	var err error
	if sel.name, err = wholeMatch(field+".name", t.Name); err != nil {
		return sel, err
	}
	if sel.namespace, err = wholeMatch(field+".namespace", t.Namespace); err != nil {
		return sel, err
	}
	if t.LabelSelector != "" {
		if sel.labels, err = labels.Parse(t.LabelSelector); err != nil {
			return sel, fault.Permanentf("%s.labelSelector: %v", field, err)
		}
	}
	return sel, nil
}

// wholeMatch compiles a regular expression that must match a whole name.
func wholeMatch(field, expr string) (*regexp.Regexp, error) {
	if expr == "" {
		return nil, nil
	}
	re, err := regexp.Compile("^(?:" + expr + ")$")
	if err != nil {
		return nil, fault.Permanentf("%s: %v", field, err)
	}
	return re, nil
}

func (s selector) matches(o *unstructured.Unstructured, defaultNamespace string) bool {
	gvk := o.GroupVersionKind()
	switch {
	case s.hasGroup && s.group != gvk.Group,
		s.version != "" && s.version != gvk.Version,
		s.kind != "" && s.kind != gvk.Kind,
		s.name != nil && !s.name.MatchString(o.GetName()):
		return false
	}
	if s.namespace != nil {
		ns := o.GetNamespace()
		if ns == "" {
			ns = defaultNamespace
		}
		if !s.namespace.MatchString(ns) {
			return false
		}
	}
	return s.labels == nil || s.labels.Matches(labels.Set(o.GetLabels()))
}

// Len is how many patches there are.
func (ps *Patches) Len() int {
	if ps == nil {
		return 0
	}
	return len(ps.list)
}

// Apply patches objs in place, leaves out those a `$patch: delete`
// selects, and marks in matched (Len long) each patch that selected at
// least one of them; it returns the objects kept. A patch that does not
// apply to an object it selects is a permanent error naming both.
func (ps *Patches) Apply(objs []*unstructured.Unstructured, matched []bool) ([]*unstructured.Unstructured, error) {
	if ps == nil {
		return objs, nil
	}
	for j, p := range ps.list {
		kept := objs[:0:0]
		for _, o := range objs {
			if !p.sel.matches(o, ps.namespace) {
				kept = append(kept, o)
				continue
			}
			matched[j] = true
			if p.drop {
				continue
			}
			if err := p.apply(o); err != nil {
				return nil, fault.Permanentf("%s: %s: %v", p.field, objectName(o), err)
			}
			kept = append(kept, o)
		}
		objs = kept
	}
	return objs, nil
}

// Unmatched is the error for the patches matched does not mark, nil when
// every one matched something.
func (ps *Patches) Unmatched(matched []bool) error {
	if ps == nil {
		return nil
	}
	var missed []string
	for j, p := range ps.list {
		if !matched[j] {
			missed = append(missed, p.field)
		}
	}
	if len(missed) == 0 {
		return nil
	}
	return fault.Permanentf("%s: matches no rendered object", strings.Join(missed, ", "))
}

// ApplyAll patches objs, returning those kept, and fails when a patch
// matched none of them.
func (ps *Patches) ApplyAll(objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	matched := make([]bool, ps.Len())
	objs, err := ps.Apply(objs, matched)
	if err != nil {
		return nil, err
	}
	return objs, ps.Unmatched(matched)
}

func (p patch) apply(o *unstructured.Unstructured) error {
	doc, err := json.Marshal(o.Object)
	if err != nil {
		return err
	}
	var out []byte
	switch {
	case p.ops != nil:
		out, err = p.ops.Apply(doc)
	default:
		out, err = mergePatch(o.GroupVersionKind(), doc, p.merge)
	}
	if err != nil {
		return err
	}
	obj := map[string]any{}
	// utiljson keeps integers int64, as decoded manifests have them.
	if err := utiljson.Unmarshal(out, &obj); err != nil {
		return err
	}
	o.Object = obj
	return nil
}

// mergePatch merges patch into doc strategically when the kind is a
// built-in one (lists of containers merge by name, as kubectl patch
// does), and as a JSON merge patch (lists replaced) for any other kind,
// whose Go type is not known here.
func mergePatch(gvk schema.GroupVersionKind, doc, patch []byte) ([]byte, error) {
	if typed, err := scheme.Scheme.New(gvk); err == nil {
		return strategicpatch.StrategicMergePatch(doc, patch, typed)
	}
	return jsonpatch.MergePatch(doc, patch)
}

// objectName names an object in messages, e.g. Deployment team-a/web.
func objectName(o *unstructured.Unstructured) string {
	if ns := o.GetNamespace(); ns != "" {
		return o.GetKind() + " " + ns + "/" + o.GetName()
	}
	return o.GetKind() + " " + o.GetName()
}
