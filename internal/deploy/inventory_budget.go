package deploy

import (
	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
)

// fitsInventory is a Stalling error when inv, recorded as the component's
// inventory, would take the environment's status over its totals
// (v1alpha1.MaxInventory objects, MaxInventoryText characters of names)
// with what the other components hold. The inventory is never cut to fit:
// an object missing from it would never be pruned nor deleted with the
// environment. Nothing is applied then; the inventory in status stays as
// it was.
func fitsInventory(env *v1alpha1.DevEnvironment, component string, inv Inventory) error {
	objects, text := env.Status.InventorySize(component)
	mine := 0
	for _, r := range inv.Entries {
		mine += len(r.Group) + len(r.Version) + len(r.Kind) + len(r.Namespace) + len(r.Name)
	}
	if n := len(inv.Entries); objects+n > v1alpha1.MaxInventory {
		return fault.Permanentf("manifests: %d objects (with those to prune) do not fit status.components[%s].inventory: the environment holds at most %d objects and the other components hold %d; split the manifests across environments or deploy them with Helm",
			n, component, v1alpha1.MaxInventory, objects)
	}
	if text+mine > v1alpha1.MaxInventoryText {
		return fault.Permanentf("manifests: the names of %d objects (with those to prune, %d characters) do not fit status.components[%s].inventory: the environment holds at most %d characters of object names and the other components hold %d; split the manifests across environments or deploy them with Helm",
			len(inv.Entries), mine, component, v1alpha1.MaxInventoryText, text)
	}
	return nil
}
