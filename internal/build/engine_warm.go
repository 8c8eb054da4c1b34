package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/image"
	"github.com/devloop-dev/devloop/internal/pods"
)

// warmBuilders is the backend of an image with run.keepWarm: a warm
// builder pod per platform. The pod stays up between builds, and each
// build is three processes (WarmBuildSteps: fetch, run, push) exec'd into
// it as the environment's ServiceAccount, outside the reconcile
// (warmBuilds), which it wakes when done; all three within run.timeout.
// The image is published (index and tags) once every platform pushed.
type warmBuilders struct{ s *imageBuilds }

func (w warmBuilders) build(ctx context.Context, b *imageBuild) (built, error) {
	s, img := w.s, b.img
	if err := s.e.needHelperImage(img); err != nil {
		return built{}, err
	}
	tenant, err := s.tenant.Client()
	if err != nil {
		return built{}, err
	}
	if err := s.removeStaleWarmPods(ctx, tenant, img); err != nil {
		return built{}, err
	}
	digests := map[string]v1.Hash{}
	var outputs []image.OutputReport
	var waiting []string
	for _, p := range img.BuildPlatforms() {
		out, err := s.buildWarmOn(ctx, tenant, b, p)
		if err != nil {
			return built{}, err
		}
		if out.waiting != "" {
			waiting = append(waiting, out.waiting)
			continue
		}
		digests[p] = out.digest
		if len(out.report.Outputs) > 0 {
			outputs = out.report.Outputs
		}
	}
	if len(waiting) > 0 {
		return built{waiting: strings.Join(waiting, "; ")}, nil
	}
	res, err := s.publishBuilt(ctx, img, b.ist, digests, outputs, b.tags)
	return built{result: res}, err
}

// platformBuilt is one platform's build by a builder: pushed (digest and
// the builder's report) or, when waiting is set, not yet.
type platformBuilt struct {
	digest  v1.Hash
	report  AssembleReport
	waiting string
}

// buildWarmOn builds b's image for platform p in its warm builder: the
// pod first (started or replaced when its spec changed), then this
// inputs' run (warmRunOf), then what it came to (warmRunOutcome).
func (s *imageBuilds) buildWarmOn(ctx context.Context, tenant client.Client, b *imageBuild, p string) (platformBuilt, error) {
	req, err := s.builderRequest(ctx, tenant, b.img, b.spec, b.ref, p, WarmPodName(s.env.Name, b.img.Name, p))
	if err != nil {
		return platformBuilt{}, err
	}
	pod, msg, err := ensureWarmPod(ctx, tenant, req)
	if err != nil {
		return platformBuilt{}, err
	}
	if pod == nil {
		s.next.Poll = true // nothing reports the pod starting
		return platformBuilt{waiting: msg}, nil
	}
	key := string(pod.UID) + "/" + b.inputs
	run, msg, err := s.warmRunOf(ctx, b, req, pod, p, key)
	if err != nil || run == nil {
		return platformBuilt{waiting: msg}, err
	}
	markWarmRunning(b.ist, pod.Name, run)
	return s.warmRunOutcome(ctx, b, req, pod, run, key)
}

// warmRunOf is the run of these inputs in pod: the one running or done,
// or a new one once a timed-out run's delay is over and the cache claim's
// lane is free. Nil with what it waits for meanwhile.
func (s *imageBuilds) warmRunOf(ctx context.Context, b *imageBuild, req JobRequest, pod *corev1.Pod, p, key string) (*warmRun, string, error) {
	img, ist := b.img, b.ist
	warm := s.e.warmBuilds()
	run := warm.lookup(key)
	attempt := 1
	if run != nil {
		// A timed-out build is tried again once its delay is over.
		out, done := run.outcome()
		if !done || !out.timedOut {
			return run, "", nil
		}
		if wait := time.Until(out.ended.Add(retryDelay(out.timeout, run.attempt))); wait > 0 {
			if ist.Build == nil {
				ist.Build = &v1alpha1.BuildStatus{Job: pod.Name}
			}
			ist.Build.Result, ist.Build.ExitCode, ist.Build.LogTail = v1alpha1.BuildFailed, nil, out.logTail
			markCompleted(ist.Build)
			s.next.RequeueWithin(wait)
			return nil, fmt.Sprintf("image %s: the build in warm builder %s ran %s, past run.timeout (%s): trying again in %s (attempt %d)",
				img.Name, pod.Name, ranFor(run, out), out.timeout, wait.Round(time.Second), run.attempt+1), nil
		}
		attempt = run.attempt + 1
	}
	// Another image's builder Job of the lane, or a suite's Job on the
	// claim, compiles what this build would: the build starts after it
	// (its end reconciles). Other warm builds of the lane are waited for
	// in memory (runInLane).
	if busy, err := b.waitTurn(ctx, p); err != nil || busy != "" {
		return nil, busy, err
	}
	// The steps are written once the claim names the token; a request
	// they cannot be written for fails here, not there.
	if _, err := WarmBuildSteps(req, "check"); err != nil {
		return nil, "", err
	}
	log.FromContext(ctx).Info("building in warm builder", "pod", pod.Name, "image", img.Name, "platform", p, "revision", b.ref.Revision, "attempt", attempt)
	tenant, exec := s.tenant, s.e.Exec
	ns, name := pod.Namespace, pod.Name
	return warm.start(key, string(pod.UID), s.env, warmPlan{
		claim:   WarmClaimStep(claimKey(key), newBuildToken()),
		steps:   func(token string) ([]WarmStep, error) { return WarmBuildSteps(req, token) },
		timeout: s.e.buildTimeout(img.Run), attempt: attempt,
		lane: b.turn.lane(p), holder: "image " + img.Name,
		image: img.Name, builder: pod.Namespace + "/" + pod.Name,
	}, func(ctx context.Context, step WarmStep, stdout, stderr io.Writer) error {
		if exec != nil {
			return exec.Exec(ctx, tenant, ns, name, step.Container, step.Command, stdout, stderr)
		}
		return tenant.Exec(ctx, ns, name, step.Container, step.Command, stdout, stderr)
	}), "", nil
}

// markWarmRunning says in status that run is pod's build. Status tells
// this run from an earlier one by its start, which the claim tells (an
// adopted build keeps its original start) and status keeps to the second.
func markWarmRunning(ist *v1alpha1.ImageStatus, pod string, run *warmRun) {
	started := run.startedAt()
	switch b := ist.Build; {
	case started.IsZero():
		if b == nil || b.Job != pod || b.Result != v1alpha1.BuildRunning {
			ist.Build = &v1alpha1.BuildStatus{Job: pod, Result: v1alpha1.BuildRunning}
		}
	case b == nil || b.Job != pod || b.StartTime == nil || !b.StartTime.Time.Equal(started.Truncate(time.Second)):
		ist.Build = &v1alpha1.BuildStatus{Job: pod, Result: v1alpha1.BuildRunning, StartTime: &metav1.Time{Time: started.Truncate(time.Second)}}
	}
}

// warmRunOutcome is what run came to: still running (or queued for its
// lane), timed out (tried again after a delay), failed, stopped by the
// registry down, or pushed.
func (s *imageBuilds) warmRunOutcome(ctx context.Context, b *imageBuild, req JobRequest, pod *corev1.Pod, run *warmRun, key string) (platformBuilt, error) {
	img, ist := b.img, b.ist
	warm := s.e.warmBuilds()
	out, done := run.outcome()
	switch {
	case !done:
		if behind, queued := run.waitingForLane(); queued {
			s.next.RequeueWithin(runningTailInterval) // its turn comes without an event
			return platformBuilt{waiting: fmt.Sprintf("image %s waits for the build of %s, which shares build cache claim %s: one compile at a time",
				img.Name, orSomeone(behind), req.CacheClaim)}, nil
		}
		// Status shows how the build goes, looked at again while it runs
		// (its end wakes the environment at once anyway).
		ist.Build.LogTail = run.liveTail()
		s.next.RequeueWithin(runningTailInterval)
		return platformBuilt{waiting: fmt.Sprintf("building image %s in warm builder %s", img.Name, pod.Name) + run.progress().String()}, nil
	case out.timedOut:
		// Tried again after a delay (the next reconcile says when): the
		// helper stopped it, and the cache it filled makes the next
		// attempt shorter.
		log.FromContext(ctx).Info("warm build timed out; trying again", "pod", pod.Name, "image", img.Name, "ran", ranFor(run, out), "timeout", out.timeout, "attempt", run.attempt)
		ist.Build.Result, ist.Build.ExitCode, ist.Build.LogTail = v1alpha1.BuildFailed, nil, out.logTail
		markCompleted(ist.Build)
		wait := retryDelay(out.timeout, run.attempt)
		s.next.RequeueWithin(wait)
		return platformBuilt{waiting: fmt.Sprintf("image %s: the build in warm builder %s ran %s, past run.timeout (%s): trying again in %s (attempt %d)",
			img.Name, pod.Name, ranFor(run, out), out.timeout, wait, run.attempt+1)}, nil
	case out.err != nil && out.exitCode == nil:
		// The exec itself broke (the pod went away, the API server
		// restarted): the next reconcile builds again.
		warm.forget(key)
		if execRefused(out.err) {
			return platformBuilt{}, fault.Stalledf(v1alpha1.ReasonForbidden,
				"image %s: exec into warm builder %s: %w (run.keepWarm needs get and create on pods/exec, on the warm builder's name, for the environment's ServiceAccount)", img.Name, pod.Name, out.err)
		}
		return platformBuilt{}, fmt.Errorf("image %s: build in warm builder %s: %w", img.Name, pod.Name, out.err)
	case out.exitCode != nil && (*out.exitCode == ExitUnavailable || *out.exitCode == ExitNoSuchHost) && (out.step == WarmStepFetch || out.step == WarmStepPush):
		// The registry is down (devloop's own step said so, not the build
		// command): waited for, and the build goes on where it stopped
		// (the claim adopts it, the command is not run again).
		ist.Build.LogTail = out.logTail
		msg := fmt.Sprintf("image %s: the registry was unavailable to the %s step in warm builder %s", img.Name, out.step, pod.Name)
		if last := lastBuildLine(out.logTail); last != "" {
			msg += ": " + last
		}
		if time.Since(out.ended) >= jobRetryDelay {
			warm.forget(key)
		}
		return platformBuilt{}, s.unavailableIn(img, out.exitCode, msg)
	case out.err != nil:
		return platformBuilt{}, warmBuildFailed(img, ist, pod.Name, out)
	}
	h, err := v1.NewHash(out.report.Digest)
	if err != nil {
		return platformBuilt{}, fmt.Errorf("warm builder %s reported digest %q: %w", pod.Name, out.report.Digest, err)
	}
	if b.missing {
		// The registry lost the image: a build of these inputs that
		// reported a digest it no longer holds runs again.
		gone, err := s.reportGone(ctx, img, out.report)
		if err != nil {
			return platformBuilt{}, err
		}
		if gone {
			warm.forget(key)
			s.next.Poll = true
			return platformBuilt{waiting: fmt.Sprintf("image %s is missing from the registry: building it again in warm builder %s", img.Name, pod.Name)}, nil
		}
	}
	return platformBuilt{digest: h, report: out.report}, nil
}

// removeStaleWarmPods deletes this environment's warm builders of img that
// no platform uses any more, or named by an earlier naming scheme: an idle
// builder still holds the credentials. The operator lists (it may list
// pods); the tenant deletes.
func (s *imageBuilds) removeStaleWarmPods(ctx context.Context, tenant client.Client, img *v1alpha1.ImageSpec) error {
	if s.e.APIReader == nil {
		return nil
	}
	want := map[string]bool{}
	for _, p := range img.BuildPlatforms() {
		want[WarmPodName(s.env.Name, img.Name, p)] = true
	}
	list := &corev1.PodList{}
	if err := s.e.APIReader.List(ctx, list, client.InNamespace(s.env.Namespace), client.MatchingLabels{
		v1alpha1.LabelEnvironment: v1alpha1.LabelValue(s.env.Name), v1alpha1.LabelImage: v1alpha1.LabelValue(img.Name), v1alpha1.LabelRole: v1alpha1.RoleWarmBuild,
	}); err != nil {
		return err
	}
	for i := range list.Items {
		pod := &list.Items[i]
		if want[pod.Name] || !metav1.IsControlledBy(pod, s.env) || !pod.DeletionTimestamp.IsZero() {
			continue
		}
		log.FromContext(ctx).Info("removing a warm builder no longer used", "pod", pod.Name)
		if err := tenant.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return identity.Refused(err, "delete warm builder pod "+pod.Name)
		}
	}
	return nil
}

// ensureWarmPod creates the warm builder, or replaces one whose spec
// changed or that stopped. It returns the pod once its builder container
// runs, else a message saying what it waits for.
func ensureWarmPod(ctx context.Context, tenant client.Client, req JobRequest) (*corev1.Pod, string, error) {
	want, err := WarmPod(req)
	if err != nil {
		return nil, "", err
	}
	pod := &corev1.Pod{}
	err = tenant.Get(ctx, types.NamespacedName{Namespace: req.Namespace, Name: req.Name}, pod)
	switch {
	case apierrors.IsNotFound(err):
		log.FromContext(ctx).Info("starting warm builder", "pod", req.Name)
		if err := tenant.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, "", identity.Refused(err, "create warm builder pod "+req.Name)
		}
		return nil, "starting warm builder " + req.Name, nil
	case err != nil:
		return nil, "", identity.Refused(err, "get warm builder pod "+req.Name)
	}
	if owner := metav1.GetControllerOf(pod); owner == nil || owner.UID != req.Owner.UID {
		return nil, "", notOurs("warm builder pod", req.Name)
	}
	if !pod.DeletionTimestamp.IsZero() {
		if node, reason, ok := disruption(pod); ok {
			// A drain evicted it: say where, and that it starts again.
			return nil, fmt.Sprintf("warm builder %s on node %s was stopped (%s): it starts again on a node that takes pods", req.Name, node, reason), nil
		}
		return nil, "waiting for the previous warm builder " + req.Name + " to stop", nil
	}
	stopped := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	if stopped || pod.Annotations[AnnotationSpecHash] != want.Annotations[AnnotationSpecHash] {
		log.FromContext(ctx).Info("replacing warm builder", "pod", req.Name, "phase", pod.Status.Phase)
		if err := tenant.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); err != nil && !apierrors.IsNotFound(err) {
			return nil, "", identity.Refused(err, "delete warm builder pod "+req.Name)
		}
		return nil, "replacing warm builder " + req.Name, nil
	}
	// Both containers must run: the build container for the command, the
	// agent for fetch and push. One that stopped (RestartPolicy Never
	// keeps the pod Running for the other) is replaced with the pod.
	running := 0
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Terminated != nil {
			log.FromContext(ctx).Info("replacing warm builder", "pod", req.Name, "stopped", cs.Name)
			if err := tenant.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); err != nil && !apierrors.IsNotFound(err) {
				return nil, "", identity.Refused(err, "delete warm builder pod "+req.Name)
			}
			return nil, "replacing warm builder " + req.Name, nil
		}
		if (cs.Name == ContainerWarm || cs.Name == ContainerWarmAgent) && cs.State.Running != nil {
			running++
		}
	}
	if running == 2 {
		return pod, "", nil
	}
	if why := pods.StrandedByVolume(pod); why != "" && req.CacheClaim != "" {
		// Its cache claim's node takes no pods now: a fresh claim, and
		// the pod again, on a node that can run it.
		msg, dropped, err := pods.DropStrandedClaim(ctx, tenant, req.Namespace, req.Owner.UID, req.CacheClaim, "build cache claim", why)
		if err != nil {
			return nil, "", err
		}
		if dropped {
			log.FromContext(ctx).Info("warm builder stranded by its cache claim's node; starting again with a fresh cache", "pod", req.Name, "claim", req.CacheClaim, "scheduler", why)
			if err := tenant.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return nil, "", identity.Refused(err, "delete warm builder pod "+req.Name)
			}
		}
		if msg != "" {
			return nil, "warm builder " + req.Name + ": " + msg, nil
		}
	}
	return nil, "waiting for warm builder " + req.Name + " to start" + pods.WaitingReason(pod), nil
}

// warmBuildFailed records a failed build and stalls the environment until
// the inputs change, as for a builder Job.
func warmBuildFailed(img *v1alpha1.ImageSpec, ist *v1alpha1.ImageStatus, pod string, out warmOutcome) error {
	ist.Build.Result = v1alpha1.BuildFailed
	ist.Build.ExitCode = out.exitCode
	markCompleted(ist.Build)
	ist.Build.LogTail = out.logTail
	msg := fmt.Sprintf("image %s: build failed in warm builder %s: exit code %d", img.Name, pod, *out.exitCode)
	if last := lastBuildLine(out.logTail); last != "" {
		msg += ": " + last
	}
	return fault.Stalled(v1alpha1.ReasonBuildFailed, errors.New(msg))
}

// ranFor is how long a finished build ran, to the second.
func ranFor(run *warmRun, out warmOutcome) time.Duration {
	started := run.startedAt()
	if started.IsZero() {
		return 0
	}
	return out.ended.Sub(started).Round(time.Second)
}

// claimKey names a build's inputs in a warm builder (its pod UID and
// inputs) as one plain word for the claim.
func claimKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:16])
}

// orSomeone names a lane's holder, or says it is being handed over.
func orSomeone(holder string) string {
	if holder == "" {
		return "another image"
	}
	return holder
}
