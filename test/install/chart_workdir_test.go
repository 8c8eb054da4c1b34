package install

import (
	"context"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
)

// workDirPersistence is everything() with the work directory on a claim.
func workDirPersistence() map[string]any {
	vals := everything()
	vals["workDir"] = map[string]any{"sizeLimit": "6Gi", "persistence": map[string]any{"enabled": true, "size": "20Gi", "storageClass": "fast"}}
	return vals
}

// workVolume is the volume mounted at the manager's --work-dir.
func workVolume(t *testing.T, d *appsv1.Deployment) corev1.Volume {
	t.Helper()
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "work" {
			return v
		}
	}
	t.Fatalf("Deployment %s has no work volume", d.Name)
	return corev1.Volume{}
}

// workDir.persistence keeps the source store and the team build cache on a
// claim the chart makes, one per instance (the main one and each shard),
// ReadWriteOnce, of the size and class asked. A Deployment on it is
// replaced with Recreate (a rolling update's new pod, scheduled on another
// node, would wait for the old pod's attachment forever), and its replicas
// share the claim's node (required pod affinity), so a standby that
// becomes leader mounts the same store. Off, the work directory is an
// emptyDir with its size limit, and no claim is made.
func TestChartWorkDirPersistence(t *testing.T) {
	objs := renderChart(t, workDirPersistence())
	for name, claim := range map[string]string{"devloop-manager": "devloop-work", "devloop-manager-team-a": "devloop-work-team-a"} {
		d := deploymentOf(t, objs, name)
		if v := workVolume(t, d); v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != claim {
			t.Errorf("%s: work volume %+v, want the claim %s", name, v.VolumeSource, claim)
		}
		// The source store is flushed and trusted on whatever node the
		// claim goes to next (its entries are otherwise trusted only in the
		// boot that wrote them).
		if args := containerNamed(t, d, "manager").Args; !slices.Contains(args, "--source-store-flush") {
			t.Errorf("%s: args %v lack --source-store-flush", name, args)
		}
		if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
			t.Errorf("%s: strategy %q, want Recreate on a ReadWriteOnce claim", name, d.Spec.Strategy.Type)
		}
		aff := d.Spec.Template.Spec.Affinity
		if aff == nil || aff.PodAffinity == nil || len(aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
			t.Fatalf("%s: affinity %+v, want the replicas on one node", name, aff)
		}
		term := aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0]
		if term.TopologyKey != "kubernetes.io/hostname" || term.LabelSelector == nil {
			t.Errorf("%s: pod affinity term %+v, want kubernetes.io/hostname and a selector", name, term)
		} else {
			for k, v := range term.LabelSelector.MatchLabels {
				if d.Spec.Template.Labels[k] != v {
					t.Errorf("%s: the affinity selects %s=%s, its pods have %q", name, k, v, d.Spec.Template.Labels[k])
				}
			}
		}
		pvc := &corev1.PersistentVolumeClaim{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(find(t, objs, "PersistentVolumeClaim", claim).Object, pvc); err != nil {
			t.Fatal(err)
		}
		if len(pvc.Spec.AccessModes) != 1 || pvc.Spec.AccessModes[0] != corev1.ReadWriteOnce {
			t.Errorf("claim %s access modes %v, want ReadWriteOnce", claim, pvc.Spec.AccessModes)
		}
		if got := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(resource.MustParse("20Gi")) != 0 {
			t.Errorf("claim %s asks %s, want 20Gi", claim, got.String())
		}
		if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != "fast" {
			t.Errorf("claim %s storage class %v, want fast", claim, pvc.Spec.StorageClassName)
		}
	}
	ctx := context.Background()
	ensureRestrictedNamespace(t, ctx, namespace)
	dryRunApply(t, ctx, objs)
	dryRunPod(t, ctx, deploymentOf(t, objs, "devloop-manager"))

	// Off (the default): an emptyDir, a rolling update, no claim.
	objs = renderChart(t, everything())
	d := deploymentOf(t, objs, "devloop-manager")
	if v := workVolume(t, d); v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.String() != "6Gi" {
		t.Errorf("work volume %+v, want an emptyDir of 6Gi", v.VolumeSource)
	}
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		t.Errorf("strategy Recreate without a claim")
	}
	if args := containerNamed(t, d, "manager").Args; slices.Contains(args, "--source-store-flush") {
		t.Errorf("--source-store-flush on an emptyDir")
	}
	for _, o := range objs {
		if o.GetKind() == "PersistentVolumeClaim" && o.GetName() != "devloop-registry" {
			t.Errorf("claim %s made with workDir.persistence off", o.GetName())
		}
	}
}

// The user's own affinity wins over the one the chart adds.
func TestChartWorkDirPersistenceKeepsTheUsersAffinity(t *testing.T) {
	vals := workDirPersistence()
	vals["affinity"] = map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
		"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "disk", "operator": "In", "values": []any{"ssd"}}}}}}}}
	aff := deploymentOf(t, renderChart(t, vals), "devloop-manager").Spec.Template.Spec.Affinity
	if aff == nil || aff.NodeAffinity == nil || aff.PodAffinity != nil {
		t.Errorf("affinity %+v, want exactly the values' affinity", aff)
	}
}

// One replica on the work claim gets no pod affinity: the pod replacing
// one a drain evicted is created while the old one still terminates on
// the drained node, and a required affinity to its own labels held it
// to that node (seen on two nodes: Pending, "didn't match pod affinity
// rules", until the scheduler's periodic retry).
func TestChartWorkDirPersistenceOneReplicaFollowsTheClaimOnly(t *testing.T) {
	vals := workDirPersistence()
	vals["replicaCount"] = 1
	objs := renderChart(t, vals)
	d := deploymentOf(t, objs, "devloop-manager")
	if aff := d.Spec.Template.Spec.Affinity; aff != nil && aff.PodAffinity != nil {
		t.Errorf("one replica with pod affinity %+v: a replacement could not leave a drained node", aff.PodAffinity)
	}
	if v := workVolume(t, d); v.PersistentVolumeClaim == nil {
		t.Errorf("work volume %+v, want the claim", v.VolumeSource)
	}
}
