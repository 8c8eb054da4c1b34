package deploy

import (
	"context"
	"fmt"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
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
	r, err := Check(ctx, c, refs)
	return append(r.Failed, r.NotReady...), err
}

// Readiness is what Check found.
type Readiness struct {
	// Failed are objects that failed for good (kstatus Failed: a Job out
	// of retries): waiting longer changes nothing.
	Failed []string
	// NotReady are objects not ready yet. A workload's line names its
	// first pod that cannot get going (an image that cannot be pulled, a
	// crash loop, no node to run on), so status says why it waits.
	NotReady []string
	// NotWaited counts the objects the component's health does not wait
	// for (spec.components[].health); NotWaitedOn are the lines of those
	// of them that are not Current, for status to say so.
	NotWaited   int
	NotWaitedOn []string
}

// Check is Ready with failures told apart from what is still in flight.
func Check(ctx context.Context, c client.Reader, refs []ObjRef) (Readiness, error) {
	return CheckHealth(ctx, c, refs, nil)
}

// CheckHealth is Check for a component whose health spec leaves some
// objects out of the wait: they are read and described all the same.
func CheckHealth(ctx context.Context, c client.Reader, refs []ObjRef, health *v1alpha1.HealthSpec) (Readiness, error) {
	r, _, err := checkVersions(ctx, c, refs, health)
	return r, err
}

// Versions are the resourceVersions of objects as read, "" for one not
// found: equal versions mean nothing, spec or status, changed in between.
type Versions map[ObjRef]string

// checkVersions is Check, also returning the resourceVersion each object
// was read at, so the reads readiness needs anyway tell the engine
// whether anything changed since it last looked (see appliedBook).
func checkVersions(ctx context.Context, c client.Reader, refs []ObjRef, health *v1alpha1.HealthSpec) (Readiness, Versions, error) {
	var r Readiness
	versions := make(Versions, len(refs))
	for _, ref := range refs {
		waited := health.Waits(ref.Group, ref.Kind, ref.Name)
		if !waited {
			r.NotWaited++
		}
		o := &unstructured.Unstructured{}
		o.SetGroupVersionKind(ref.GroupVersionKind())
		err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, o)
		if apierrors.IsNotFound(err) {
			versions[ref] = ""
			line := describe(c, ref) + ": not found"
			if waited {
				r.NotReady = append(r.NotReady, line)
			} else {
				r.NotWaitedOn = append(r.NotWaitedOn, line)
			}
			continue
		}
		if err != nil {
			return Readiness{}, nil, classify(c, err, "get", ref)
		}
		versions[ref] = o.GetResourceVersion()
		msg, state := objectState(o)
		if state == objReady {
			continue
		}
		if !waited {
			// Listed, not waited for: its pods are not read.
			r.NotWaitedOn = append(r.NotWaitedOn, describe(c, ref)+": "+msg)
			continue
		}
		// A workload that failed (its progress deadline passed) failed
		// for the reason its pods were stuck on while it waited: kstatus
		// says only "Progress deadline exceeded", so the pod's line stays.
		line := describe(c, ref) + ": " + msg
		if why := podTrouble(ctx, c, o); why != "" {
			line += "; " + why
		}
		if state == objFailed {
			r.Failed = append(r.Failed, line)
		} else {
			r.NotReady = append(r.NotReady, line)
		}
	}
	return r, versions, nil
}

type objectHealth int

const (
	objReady objectHealth = iota
	objWaiting
	objFailed
)

// objectState is the readiness of one object, with why not: ready when
// Current by kstatus (a Job only once complete), failed when kstatus says
// Failed, else waiting. kstatus is computed once.
func objectState(o *unstructured.Unstructured) (string, objectHealth) {
	res, err := status.Compute(o)
	switch {
	case err != nil:
		return fmt.Sprintf("computing status: %v", err), objWaiting
	case res.Status == status.FailedStatus:
		return withOwnReason(o, res), objFailed
	case res.Status != status.CurrentStatus:
		return withOwnReason(o, res), objWaiting
	case o.GetKind() == "Job" && o.GroupVersionKind().Group == "batch" && !jobComplete(o):
		return res.Message, objWaiting
	}
	return "", objReady
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
