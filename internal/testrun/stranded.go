package testrun

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/message"
	"github.com/devloop-dev/devloop/internal/pods"
)

// strandedRunMessage says why a run's pod cannot start when its cache
// claim's volume is bound to a node that takes no pods now (a
// ReadWriteOnce claim on a node's own disk, the node drained or gone), ""
// otherwise. Without it the run would sit Running with no word until its
// timeout. Unlike a builder (pods.DropStrandedClaim), the run keeps its
// claim and its Job: a run is one trigger's, started once, and what the
// cache holds comes back with the node.
func strandedRunMessage(job *batchv1.Job, jobPods []corev1.Pod) string {
	claim := cacheClaimOf(job)
	if claim == "" {
		return ""
	}
	for i := range jobPods {
		if why := pods.StrandedByVolume(&jobPods[i]); why != "" {
			what := "test cache claim"
			if job.Labels[pods.LabelBuildCache] == claim {
				what = "build cache claim" // shared with the suite's images
			}
			return message.Truncate(pods.StrandedClaimNote(what, claim, why)+": the run starts when that node takes pods again", v1alpha1.MaxRunMessage)
		}
	}
	return ""
}

// cacheClaimOf is the claim the Job mounts as the suite's cache, if any.
func cacheClaimOf(job *batchv1.Job) string {
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.Name == volumeTestCache && v.PersistentVolumeClaim != nil {
			return v.PersistentVolumeClaim.ClaimName
		}
	}
	return ""
}
