package v1alpha1

import "testing"

// TestOwnedObjectsListBothKinds: what a component owns is what its
// manifests applied and its release's workloads, with the workloads
// status left out counted; a component switched from one kind to the
// other owns both until the old one is removed.
func TestOwnedObjectsListBothKinds(t *testing.T) {
	applied := ObjectRef{Version: "v1", Kind: "Service", Namespace: "a", Name: "web"}
	workload := ObjectRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "b", Name: "api"}
	for _, c := range []struct {
		name string
		st   ComponentStatus
		want []ObjectRef
		more int
	}{
		{"nothing deployed", ComponentStatus{}, nil, 0},
		{"manifests", ComponentStatus{Inventory: []ObjectRef{applied}}, []ObjectRef{applied}, 0},
		{"a release", ComponentStatus{Release: &ReleaseStatus{Name: "api", Workloads: []ObjectRef{workload}, MoreWorkloads: 2}}, []ObjectRef{workload}, 2},
		{"a release with no workloads", ComponentStatus{Release: &ReleaseStatus{Name: "api"}}, nil, 0},
		{"switched", ComponentStatus{Inventory: []ObjectRef{applied}, Release: &ReleaseStatus{Workloads: []ObjectRef{workload}}}, []ObjectRef{applied, workload}, 0},
	} {
		objs, more := c.st.OwnedObjects()
		if len(objs) != len(c.want) || more != c.more {
			t.Errorf("%s: %v (%d more), want %v (%d more)", c.name, objs, more, c.want, c.more)
			continue
		}
		for i := range objs {
			if objs[i] != c.want[i] {
				t.Errorf("%s: object %d is %v, want %v", c.name, i, objs[i], c.want[i])
			}
		}
		if owns := c.st.OwnsObjects(); owns != (c.name != "nothing deployed") {
			t.Errorf("%s: OwnsObjects %v", c.name, owns)
		}
	}
}
