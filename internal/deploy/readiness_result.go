package deploy

import (
	"context"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// readiness is Ready when every object the component waits for is
// Current by kstatus, Failed when one failed for good (a Job out of
// retries), else Deploying with what it waits for — a stuck pod named
// with its image and, for a built image, the registry field its
// reference came from; a custom resource with its own reason.
func readiness(ctx context.Context, env *v1alpha1.DevEnvironment, c *v1alpha1.Component, cl client.Reader, refs []ObjRef, done string) (Result, error) {
	r, err := CheckHealth(ctx, cl, refs, c.Health)
	if err != nil {
		return Result{}, err
	}
	return readinessResult(env, c, r, done), nil
}

// readinessResult is the component's result from what Check found.
func readinessResult(env *v1alpha1.DevEnvironment, c *v1alpha1.Component, r Readiness, done string) Result {
	if len(r.Failed) > 0 {
		for i, line := range r.Failed {
			r.Failed[i] = line + pullHint(env, line)
		}
		return Result{Phase: v1alpha1.PhaseFailed, Message: done + "; failed: " + strings.Join(r.Failed, "; ") + notWaitedNote(env, c, r, false)}
	}
	if len(r.NotReady) > 0 {
		for i, line := range r.NotReady {
			r.NotReady[i] = line + pullHint(env, line)
		}
		return Result{Phase: v1alpha1.PhaseDeploying, Message: done + "; " + waitingMessage(r.NotReady) + notWaitedNote(env, c, r, false)}
	}
	if r.NotWaited > 0 && len(r.NotWaitedOn) > 0 {
		return Result{Phase: v1alpha1.PhaseReady, Message: done + ", all waited for Current" + notWaitedNote(env, c, r, true)}
	}
	return Result{Phase: v1alpha1.PhaseReady, Message: done + ", all Current" + notWaitedNote(env, c, r, false)}
}

// notWaitedNote says how many objects the component's health spec leaves
// out of the wait, so a Ready that did not wait for everything says so;
// once Ready, the first of them that is not Current too (a user reading
// "Ready" should not have to guess which object is not).
func notWaitedNote(env *v1alpha1.DevEnvironment, c *v1alpha1.Component, r Readiness, withLines bool) string {
	if r.NotWaited == 0 {
		return ""
	}
	objects := "objects"
	if r.NotWaited == 1 {
		objects = "object"
	}
	note := fmt.Sprintf("; %d %s not waited for (%s.health)", r.NotWaited, objects, componentField(env, c))
	if withLines && len(r.NotWaitedOn) > 0 {
		note += ", not Current: " + r.NotWaitedOn[0]
		if n := len(r.NotWaitedOn) - 1; n > 0 {
			note += fmt.Sprintf(" (and %d more)", n)
		}
	}
	return note
}
