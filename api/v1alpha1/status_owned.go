package v1alpha1

// The objects a component owns, as its status records them: what its
// manifests applied (Inventory) and its Helm release's workloads
// (Release.Workloads; Helm keeps the rest in the release). Packages
// outside the deploy engine ask these two accessors instead of reading
// either field (test/layout checks), so a third deploy kind records its
// objects here and every reader — removal of a dropped or turned-off
// component, live update's namespaces, the plugin's logs and the
// dashboard's objects — follows.

// OwnsObjects reports whether status says the component deployed
// something it owns: a release or applied objects, which are removed
// with it.
func (s *ComponentStatus) OwnsObjects() bool {
	return s.Release != nil || len(s.Inventory) > 0
}

// OwnedObjects are the objects status lists as the component's, and how
// many more the status left out (it holds at most MaxWorkloads of a
// release's workloads). Both kinds are listed: a component switched
// from one to the other holds both until the old one is removed.
func (s *ComponentStatus) OwnedObjects() (objs []ObjectRef, more int) {
	objs = append(objs, s.Inventory...)
	if s.Release != nil {
		objs = append(objs, s.Release.Workloads...)
		more = int(s.Release.MoreWorkloads)
	}
	return objs, more
}
