package pods

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/message"
)

// A ReadWriteOnce cache claim whose volume is a node's own disk (a local
// or host-path class) can only be mounted on that node. When that node is
// drained (cordoned), tainted away or gone, a builder that mounts the
// claim waits for it forever. The scheduler says so on the pod; these
// words are its volume-binding plugin's (the second, older releases').
var volumeNodeAffinityWords = []string{"didn't match PersistentVolume's node affinity", "volume node affinity conflict"}

// StrandedByVolume is the scheduler's message when pod cannot be placed
// because a volume it mounts is bound to a node that cannot take it now,
// "" otherwise. A node that is only full ("Insufficient cpu") is not
// stranding: the pod gets its turn there.
func StrandedByVolume(pod *corev1.Pod) string {
	if pod.Spec.NodeName != "" || !pod.DeletionTimestamp.IsZero() {
		return ""
	}
	for _, c := range pod.Status.Conditions {
		if c.Type != corev1.PodScheduled || c.Status != corev1.ConditionFalse || c.Reason != corev1.PodReasonUnschedulable {
			continue
		}
		if strings.Contains(c.Message, "Insufficient") {
			return ""
		}
		for _, w := range volumeNodeAffinityWords {
			if strings.Contains(c.Message, w) {
				return c.Message
			}
		}
	}
	return ""
}

// StrandedClaimNote is what status says of a pod that waits for the node
// of its claim's volume (StrandedByVolume said why): what and name are the
// claim's, why the scheduler's message.
func StrandedClaimNote(what, name, why string) string {
	return fmt.Sprintf("%s %s is on a node where no pod can run now (%s)", what, name, schedulerReason(why))
}

// selectedNodeAnnotation is where the scheduler records the node it bound
// a WaitForFirstConsumer claim's volume for.
const selectedNodeAnnotation = "volume.kubernetes.io/selected-node"

// DropStrandedClaim deletes the cache claim ns/name that owner controls,
// whose volume a pod cannot reach any more (StrandedByVolume said why),
// when a new claim would follow the next pod: a claim of a
// WaitForFirstConsumer class (the scheduler recorded the node it was made
// for) is made again for the node the next builder is scheduled on. What
// was cached is lost; the build starts cold. A claim bound at once
// (Immediate class) would be placed by its class alone, maybe on the same
// node again, so it is kept and the build waits for its node. It returns
// what status says and whether the claim goes (the caller then removes
// the pod that mounts it). A claim owner does not control is left alone.
func DropStrandedClaim(ctx context.Context, tenant client.Client, ns string, owner types.UID, name, what, why string) (string, bool, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := tenant.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, pvc); err != nil {
		if apierrors.IsNotFound(err) {
			return "", false, nil
		}
		return "", false, identity.Refused(err, "get "+what+" "+name)
	}
	if ref := metav1.GetControllerOf(pvc); ref == nil || ref.UID != owner {
		return "", false, nil
	}
	node := pvc.Annotations[selectedNodeAnnotation]
	if node == "" {
		return message.Truncate(fmt.Sprintf("%s %s is on a node where no pod can run now (%s): waiting for that node (its storage class binds at once, so a new claim could land there again)",
			what, name, schedulerReason(why)), 400), false, nil
	}
	msg := message.Truncate(fmt.Sprintf("%s %s is on node %s, where no pod can run now (%s): a fresh cache on another node, this build starts cold",
		what, name, node, schedulerReason(why)), 400)
	if !pvc.DeletionTimestamp.IsZero() {
		return msg, true, nil
	}
	// Kept on the claim while it goes (its protection waits for the
	// stranded pod to be removed), so status keeps saying why meanwhile.
	patch := client.MergeFrom(pvc.DeepCopy())
	metav1.SetMetaDataAnnotation(&pvc.ObjectMeta, droppedAnnotation, msg)
	if err := tenant.Patch(ctx, pvc, patch); err != nil && !apierrors.IsNotFound(err) {
		return "", false, identity.Refused(err, "annotate "+what+" "+name)
	}
	if err := tenant.Delete(ctx, pvc, client.Preconditions{UID: &pvc.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return "", false, identity.Refused(err, "delete "+what+" "+name)
	}
	return msg, true, nil
}

// droppedAnnotation holds, on a cache claim DropStrandedClaim deletes,
// what status says of it until it is gone.
const droppedAnnotation = "devloop.dev/dropped"

// droppedClaimMessage is what status says while a claim goes.
func droppedClaimMessage(pvc *corev1.PersistentVolumeClaim, what string) string {
	if msg := pvc.Annotations[droppedAnnotation]; msg != "" {
		return msg
	}
	return fmt.Sprintf("waiting for the previous %s %s to be deleted", what, pvc.Name)
}

// schedulerReason is the scheduler's message without its preemption
// part, which says nothing more.
func schedulerReason(msg string) string {
	msg, _, _ = strings.Cut(msg, " preemption:")
	return strings.TrimSuffix(strings.TrimSpace(msg), ".")
}
