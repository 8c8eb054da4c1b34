package deploy

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
)

// configMaps is an inventory of n ConfigMaps whose names have nameLen
// characters.
func configMaps(n, nameLen int) Inventory {
	var inv Inventory
	for i := range n {
		inv.Entries = append(inv.Entries, ObjRef{Version: "v1", Kind: "ConfigMap", Namespace: "ns", Name: fmt.Sprintf("%0*d", nameLen, i)})
	}
	return inv
}

func statusRefs(inv Inventory) []v1alpha1.ObjectRef { return toStatusInventory(inv) }

func TestManifestsStallWhenTheInventoryWouldNotFitTheEnvironment(t *testing.T) {
	g := NewWithT(t)
	env := &v1alpha1.DevEnvironment{Status: v1alpha1.DevEnvironmentStatus{Components: []v1alpha1.ComponentStatus{
		{Name: "crds", Inventory: statusRefs(configMaps(200, 10))},
		{Name: "web", Inventory: statusRefs(configMaps(50, 10))},
	}}}
	// web's own inventory is replaced, not added to: 56 objects fit.
	g.Expect(fitsInventory(env, "web", configMaps(56, 10))).To(Succeed())

	err := fitsInventory(env, "web", configMaps(57, 10))
	g.Expect(fault.IsPermanent(err)).To(BeTrue(), "a Stalling error: only a human can split the manifests")
	g.Expect(err.Error()).To(And(ContainSubstring("status.components[web].inventory"), ContainSubstring("at most 256 objects"), ContainSubstring("hold 200")))

	// Long names run out of characters before objects: 100 objects of
	// 253 characters.
	env.Status.Components[0].Inventory = statusRefs(configMaps(10, 10))
	err = fitsInventory(env, "web", configMaps(100, 240))
	g.Expect(fault.IsPermanent(err)).To(BeTrue())
	g.Expect(err.Error()).To(ContainSubstring("at most 24576 characters of object names"))
}

func TestWorkloadsAreCutWithACountOfTheRest(t *testing.T) {
	g := NewWithT(t)
	var objs []*unstructured.Unstructured
	for i := range v1alpha1.MaxWorkloads + 5 {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion("apps/v1")
		o.SetKind("Deployment")
		o.SetName(fmt.Sprintf("web-%d", i))
		objs = append(objs, o)
		cm := &unstructured.Unstructured{}
		cm.SetAPIVersion("v1")
		cm.SetKind("ConfigMap")
		cm.SetName(strings.Repeat("c", 10))
		objs = append(objs, cm)
	}
	refs, more := workloads(objs)
	g.Expect(refs).To(HaveLen(v1alpha1.MaxWorkloads))
	g.Expect(more).To(BeEquivalentTo(5))
}
