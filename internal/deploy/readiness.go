package deploy

import (
	"context"
	"fmt"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Ready reads every object of refs and computes its kstatus, as Flux's
// health checks do. It returns one line per object that is not ready, e.g.
// "deployments.apps/web: Deployment does not have minimum availability";
// none means the component is ready. Current is ready; InProgress, Failed,
// Terminating, Unknown and a missing object are not. kstatus already
// requires CRDs to be Established and honours a Ready condition on custom
// resources; Jobs must also have completed (kstatus calls a running Job
// Current), since a component's Jobs are steps like an admission init.
//
// Errors are only those of reading; c may be a cached or a direct reader.
func Ready(ctx context.Context, c client.Reader, refs []ObjRef) (notReady []string, err error) {
	for _, ref := range refs {
		o := &unstructured.Unstructured{}
		o.SetGroupVersionKind(ref.GroupVersionKind())
		err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, o)
		if apierrors.IsNotFound(err) {
			notReady = append(notReady, describe(c, ref)+": not found")
			continue
		}
		if err != nil {
			return nil, classify(c, err, "get", ref)
		}
		if msg, ok := objectReady(o); !ok {
			notReady = append(notReady, describe(c, ref)+": "+msg)
		}
	}
	return notReady, nil
}

// objectReady is the readiness of one object, with why not.
func objectReady(o *unstructured.Unstructured) (string, bool) {
	res, err := status.Compute(o)
	if err != nil {
		return fmt.Sprintf("computing status: %v", err), false
	}
	if res.Status != status.CurrentStatus {
		if res.Message == "" {
			return string(res.Status), false
		}
		return res.Message, false
	}
	if o.GetKind() == "Job" && o.GroupVersionKind().Group == "batch" && !jobComplete(o) {
		return res.Message, false
	}
	return "", true
}

func jobComplete(o *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Complete" && m["status"] == "True" {
			return true
		}
	}
	return false
}
