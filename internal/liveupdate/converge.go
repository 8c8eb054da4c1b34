package liveupdate

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/engine"
	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/message"
	"github.com/devloop-dev/devloop/internal/pods"
	"github.com/devloop-dev/devloop/internal/supervisor"
)

// Target is a container that runs an image's template digest.
type Target struct {
	Namespace, Pod, Container string
	// Running is set once the container runs (it can be synced).
	Running bool
	// Down says why the container is neither running nor starting
	// (pods.NotRunning: a crash loop, say): no sync can reach it.
	Down string
	// LiveDigest is the pod's devloop.dev/live-digest annotation.
	LiveDigest string
	// Node the pod runs on: its platform picks the tar of an image of
	// several platforms.
	Node string
}

// maxPodsListed bounds the pods read per namespace.
const maxPodsListed = 500

// syncTimeout bounds one pod's sync, restart included.
const syncTimeout = time.Minute

// SyncError is a sync that failed on a pod: the component is rolled out
// instead.
type SyncError struct {
	Pod string
	Err error
}

func (e *SyncError) Error() string { return "sync failed on pod " + e.Pod + ": " + e.Err.Error() }
func (e *SyncError) Unwrap() error { return e.Err }

// converge syncs every running container of the template's digest whose
// pod has not got LiveDigest yet: all of them right after a live update,
// and later the pods started since (their supervisors wait for this
// before starting the program, up to their gate timeout; the operator
// watches such pods and reconciles as one starts to run). It returns the
// pods synced and a *SyncError when a sync failed.
func (e *Engine) converge(ctx context.Context, req engine.Request, img *v1alpha1.ImageSpec, ist *v1alpha1.ImageStatus) ([]string, error) {
	return e.convergeListed(ctx, req, img, ist, nil)
}

// convergeListed is converge with the pods listed by listed (listTargets),
// or here when it is nil.
func (e *Engine) convergeListed(ctx context.Context, req engine.Request, img *v1alpha1.ImageSpec, ist *v1alpha1.ImageStatus, listed func() ([]Target, error)) ([]string, error) {
	return e.syncTemplatePods(ctx, req, img, ist, ist.LiveDigest, true, listed, func() (map[string][]byte, error) {
		if tars, ok := e.recall(req.Env.UID, img.Name, ist.TemplateDigest, ist.LiveDigest); ok {
			return tars, nil
		}
		// The operator restarted since the live update: plan it again.
		d, data, err := e.plan(ctx, req, img, ist)
		if err != nil {
			return nil, err
		}
		if !d.Live {
			return nil, errors.New(d.Reason)
		}
		e.remember(req.Env.UID, img.Name, ist.TemplateDigest, ist.LiveDigest, data)
		return data, nil
	})
}

// openGates tells the supervisors of pods started from a template that
// runs Digest itself that they are current (an empty sync), so they start
// their program at once rather than after their gate timeout.
func (e *Engine) openGates(ctx context.Context, req engine.Request, img *v1alpha1.ImageSpec, ist *v1alpha1.ImageStatus) ([]string, error) {
	return e.syncTemplatePods(ctx, req, img, ist, ist.Digest, false, nil, emptyTar)
}

// emptyTar is a tar of no files, for every platform: "you are current".
func emptyTar() (map[string][]byte, error) {
	var buf bytes.Buffer
	err := tar.NewWriter(&buf).Close()
	return map[string][]byte{"": buf.Bytes()}, err
}

// syncTemplatePods syncs digest, with the tars tarball makes (only when a
// pod needs them; by platform, "" for every one), into the running containers of the template's digest
// whose pods lack digest in their annotation. Containers not running yet
// are left for the reconcile their start brings. With reachAll, a
// container that lacks digest and is down (a crash loop: it runs for
// moments, never long enough to be synced, and restarts on the files it
// has) fails the sync, so the component is rolled out instead. listed,
// when not nil, is the pods as listed already (listTargets).
func (e *Engine) syncTemplatePods(ctx context.Context, req engine.Request, img *v1alpha1.ImageSpec, ist *v1alpha1.ImageStatus,
	digest string, reachAll bool, listed func() ([]Target, error), tarball func() (map[string][]byte, error)) ([]string, error) {
	cl, err := req.Tenant.Client()
	if err != nil {
		return nil, err
	}
	var targets []Target
	if listed != nil {
		targets, err = listed()
	} else {
		targets, err = templateTargets(ctx, cl, req, ist)
	}
	if err != nil {
		return nil, err
	}
	if reachAll {
		for _, t := range targets {
			if t.Down != "" && t.LiveDigest != digest {
				return nil, &SyncError{Pod: t.Namespace + "/" + t.Pod,
					Err: fmt.Errorf("container %s is not running (%s): no sync can reach it", t.Container, t.Down)}
			}
		}
	}
	todo := Unsynced(targets, digest)
	if len(todo) == 0 {
		return nil, nil
	}
	tars, err := tarball()
	if err != nil {
		return nil, &SyncError{Pod: todo[0].Namespace + "/" + todo[0].Pod, Err: err}
	}
	if data, ok := tars[""]; ok {
		return e.syncAll(ctx, req.Tenant, req.Env.UID, cl, todo, digest, data)
	}
	return e.syncPerPlatform(ctx, req, cl, todo, digest, tars)
}

// listTargets starts listing the containers of the template's digest of
// ist as the tenant, and returns what waits for the list: the sync while
// the image is pushed lists them while it compares the images.
func (e *Engine) listTargets(ctx context.Context, req engine.Request, ist *v1alpha1.ImageStatus) func() ([]Target, error) {
	cl, err := req.Tenant.Client()
	if err != nil {
		return func() ([]Target, error) { return nil, err }
	}
	done := make(chan struct{})
	var targets []Target
	listed := *ist // its caller goes on with ist
	go func() {
		defer close(done)
		targets, err = templateTargets(ctx, cl, req, &listed)
	}()
	return func() ([]Target, error) {
		<-done
		return targets, err
	}
}

// templateTargets are the containers of the pods that run ist's template
// digest, in the environment's namespaces.
func templateTargets(ctx context.Context, cl client.Reader, req engine.Request, ist *v1alpha1.ImageStatus) ([]Target, error) {
	return FindTargets(ctx, cl, Namespaces(req.Env), TemplateRef(req.Env, ist), Owner(req.Env))
}

// TemplateRef is the reference the pod templates of a live-updatable
// image run: its pull repository at TemplateDigest.
func TemplateRef(env *v1alpha1.DevEnvironment, ist *v1alpha1.ImageStatus) string {
	return env.PullRepository(ist.Name, ist.Repository) + "@" + ist.TemplateDigest
}

// Namespaces are where the environment's workloads run: those of every
// component's release workloads and applied objects, and its own.
func Namespaces(env *v1alpha1.DevEnvironment) []string {
	out := []string{env.Namespace}
	add := func(ns string) {
		if ns != "" && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	for i := range env.Status.Components {
		objs, _ := env.Status.Components[i].OwnedObjects()
		for _, o := range objs {
			add(o.Namespace)
		}
	}
	return out
}

// Owner is the devloop.dev/owner value of what env deploys.
func Owner(env *v1alpha1.DevEnvironment) string { return env.Namespace + "/" + env.Name }

// FindTargets lists, as the tenant, the containers (not init containers)
// in namespaces whose image is ref, in pods not being deleted that are
// owner's (owned.go): no other pod is synced, whatever it runs.
func FindTargets(ctx context.Context, cl client.Reader, namespaces []string, ref, owner string) ([]Target, error) {
	var out []Target
	owners := newOwnership(cl, owner)
	for _, ns := range namespaces {
		pods := &corev1.PodList{}
		if err := cl.List(ctx, pods, client.InNamespace(ns), client.Limit(maxPodsListed)); err != nil {
			return nil, identity.Refused(err, "list pods in namespace "+ns+" to live update them")
		}
		for i := range pods.Items {
			targets := PodTargets(&pods.Items[i], ref)
			if len(targets) == 0 {
				continue
			}
			ok, err := owners.owns(ctx, &pods.Items[i])
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, targets...)
			}
		}
	}
	return out, nil
}

// PodTargets are the containers (not init containers) of one pod running
// ref, none when the pod is being deleted or has finished.
func PodTargets(pod *corev1.Pod, ref string) []Target {
	if !pod.DeletionTimestamp.IsZero() || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil
	}
	var out []Target
	for _, c := range pod.Spec.Containers {
		if c.Image != ref {
			continue
		}
		t := Target{Namespace: pod.Namespace, Pod: pod.Name, Container: c.Name, Node: pod.Spec.NodeName,
			LiveDigest: pod.Annotations[v1alpha1.LiveDigestAnnotation]}
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.Name == c.Name {
				t.Running = cs.State.Running != nil
				t.Down = pods.NotRunning(cs)
			}
		}
		out = append(out, t)
	}
	return out
}

// Unsynced are the running targets whose pod lacks digest.
func Unsynced(targets []Target, digest string) []Target {
	var todo []Target
	for _, t := range targets {
		if t.Running && t.LiveDigest != digest {
			todo = append(todo, t)
		}
	}
	return todo
}

// syncResult is the line the supervisor's sync prints on success.
type syncResult struct {
	Digest      string `json:"digest"`
	RestartedMs int64  `json:"restartedMs"`
	// Sent is the bytes sent: less than the tar when its files went as
	// deltas (a session's sync).
	Sent int `json:"-"`
}

// syncAll syncs the targets at once and annotates each pod synced in all
// its containers; the error is the first failure, a *SyncError.
func (e *Engine) syncAll(ctx context.Context, t *identity.Tenant, envUID types.UID, cl client.Client, todo []Target, digest string, tarball []byte) ([]string, error) {
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	failed := map[string]bool{}
	for _, target := range todo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started := time.Now()
			res, err := e.syncOne(ctx, t, envUID, target, digest, tarball)
			log.FromContext(ctx).V(1).Info("synced", "pod", target.Namespace+"/"+target.Pod, "container", target.Container,
				"bytes", len(tarball), "sent", res.Sent, "took", time.Since(started).String(), "restartedMs", res.RestartedMs, "failed", err != nil)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed[target.Namespace+"/"+target.Pod] = true
				if firstErr == nil {
					firstErr = &SyncError{Pod: target.Namespace + "/" + target.Pod, Err: err}
				}
			}
		}()
	}
	wg.Wait()
	var synced []string
	for _, target := range todo {
		key := target.Namespace + "/" + target.Pod
		if failed[key] || slices.Contains(synced, key) {
			continue
		}
		if err := annotate(ctx, cl, target, digest); err != nil {
			if firstErr == nil {
				firstErr = &SyncError{Pod: key, Err: err}
			}
			continue
		}
		synced = append(synced, key)
	}
	return synced, firstErr
}

// syncOne runs the supervisor's sync in one container, for the
// environment envUID, with the tar on stdin and checks the digest it
// reports. What the container prints is read up to maxAnswer (stdout)
// and maxStderr: a longer answer fails the sync.
func (e *Engine) syncOne(ctx context.Context, t *identity.Tenant, envUID types.UID, target Target, digest string, tarball []byte) (syncResult, error) {
	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	if e.Sessions {
		res, err := e.syncOverSession(ctx, t, envUID, target, digest, tarball)
		switch {
		case err == nil && res.Digest != digest:
			return res, fmt.Errorf("container %s: the supervisor reports digest %s, not %s", target.Container, res.Digest, digest)
		case !errors.Is(err, errSessionBroken):
			return res, err
		}
		log.FromContext(ctx).V(1).Info("no sync session; one exec instead", "pod", target.Namespace+"/"+target.Pod, "reason", err.Error())
	}
	stdout, stderr := &boundedBuffer{max: maxAnswer, refuse: true}, &boundedBuffer{max: maxStderr}
	cmd := []string{supervisor.Path, "sync", "--digest=" + digest}
	err := e.exec(ctx, t, target, cmd, bytes.NewReader(tarball), stdout, stderr)
	if stdout.Over() {
		return syncResult{}, fmt.Errorf("container %s: %w", target.Container, errAnswerTooLong)
	}
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			err = fmt.Errorf("%w: %s", err, message.Truncate(message.Condense(msg), 256))
		}
		return syncResult{}, identity.Refused(err, "exec "+supervisor.Path+" sync in container "+target.Container)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var res syncResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		return res, fmt.Errorf("container %s: the supervisor's sync said %q, not its result", target.Container, message.Truncate(lines[len(lines)-1], 128))
	}
	if res.Digest != digest {
		return res, fmt.Errorf("container %s: the supervisor reports digest %s, not %s", target.Container, res.Digest, digest)
	}
	res.Sent = len(tarball)
	return res, nil
}

// annotate records on the pod, as the tenant, that it serves digest.
func annotate(ctx context.Context, cl client.Client, target Target, digest string) error {
	pod := &corev1.Pod{}
	pod.Namespace, pod.Name = target.Namespace, target.Pod
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.LiveDigestAnnotation, digest)
	if err := cl.Patch(ctx, pod, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		return identity.Refused(err, "annotate pod "+target.Pod+" with "+v1alpha1.LiveDigestAnnotation)
	}
	return nil
}
