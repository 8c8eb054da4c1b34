package testrun

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/message"
	"github.com/devloop-dev/devloop/internal/pods"
)

// observe reads a running run's Job and records its end.
func (p *testPass) observe(ctx context.Context, suite *v1alpha1.TestSuite, run *v1alpha1.TestRun) error {
	env := p.env
	job := p.jobs[run.JobName]
	if job == nil {
		// The cache may not have seen a Job created a moment ago.
		live := &batchv1.Job{}
		err := p.e.APIReader.Get(ctx, types.NamespacedName{Namespace: env.Namespace, Name: run.JobName}, live)
		switch {
		case err == nil && metav1.IsControlledBy(live, env):
			job = live
		case err == nil:
			p.end(suite.Name, run, v1alpha1.ResultError, fmt.Sprintf("job %s belongs to another object", run.JobName))
			return nil
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("reading test job %s: %w", run.JobName, err)
		case run.StartTime == nil:
			// Recorded as started, but the operator stopped before it
			// created the Job: create it now, from what was recorded.
			p.start(suite, run)
			return nil
		default:
			p.end(suite.Name, run, v1alpha1.ResultError, fmt.Sprintf("job %s was deleted before it finished", run.JobName))
			return nil
		}
	}
	if run.StartTime == nil {
		run.StartTime = &metav1.Time{Time: job.CreationTimestamp.Time}
	}
	pods := &corev1.PodList{}
	if err := p.e.APIReader.List(ctx, pods, client.InNamespace(env.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
		return fmt.Errorf("listing pods of test job %s: %w", job.Name, err)
	}
	timeout := p.e.startTimeout()
	out := Read(job, pods.Items, p.now, timeout)
	if out.Result == v1alpha1.ResultRunning {
		run.Message = ""
		if !out.Started {
			run.Message = strandedRunMessage(job, pods.Items)
		}
		if !out.Started && len(pods.Items) > 0 {
			// Job events say when the test ends, but nothing changes on
			// the Job while its pod fails to pull an image: look again.
			p.next.RequeueWithin(min(timeout/2, 30*time.Second))
		}
		return nil
	}
	run.ExitCode = out.ExitCode
	run.CompletionTime = out.CompletionTime
	p.recordResults(suite, run, pods.Items, &out)
	if out.Pod != "" {
		run.LogTail = p.e.logTail(ctx, p.in.Tenant, env.Namespace, out.Pod, out.Container)
	}
	if out.StopJob {
		p.delete(job.Name)
	}
	p.end(suite.Name, run, out.Result, out.Message)
	return nil
}

// end records a run's result.
func (p *testPass) end(suite string, run *v1alpha1.TestRun, result v1alpha1.TestResult, msg string) {
	run.Result, run.Message = result, message.Truncate(msg, v1alpha1.MaxRunMessage)
	if run.CompletionTime == nil {
		run.CompletionTime = &metav1.Time{Time: p.now}
	}
	p.finished(suite, run)
}

// start marks the queued run Running and prepares its Job; the Job is
// created once that is committed. A run that cannot have a Job (no
// identity, a spec the Job cannot express) ends with Error.
func (p *testPass) start(suite *v1alpha1.TestSuite, run *v1alpha1.TestRun) {
	env := p.env
	if run.JobName == "" {
		run.JobName = JobName(env.Name, suite.Name, run.Number)
		run.Images = imagesUnderTest(env, suite)
	}
	job, err := p.testJob(suite, run)
	if err != nil {
		p.end(suite.Name, run, v1alpha1.ResultError, err.Error())
		return
	}
	run.Result, run.Message = v1alpha1.ResultRunning, ""
	p.creates = append(p.creates, job)
}

// testJob is the Job of a run, from the spec and what the run recorded
// (the digests it tests), so a Job made again after a crash is the same.
func (p *testPass) testJob(suite *v1alpha1.TestSuite, run *v1alpha1.TestRun) (*batchv1.Job, error) {
	env := p.env
	if _, err := p.in.Tenant.User(); err != nil {
		if stalled := fault.AsStalled(err); stalled != nil {
			err = stalled.Err
		}
		return nil, fmt.Errorf("no identity to run the test job as: %w", err)
	}
	sa := p.in.Tenant.ServiceAccount()
	image := suite.Image.Ref
	if b := suite.Image.Built; b != "" {
		_, ist := env.BuiltImage(b)
		digest := run.Images[b]
		if ist == nil || ist.Repository == "" || digest == "" {
			return nil, fmt.Errorf("image %s has no pushed digest", b)
		}
		image = env.PullRepository(b, ist.Repository) + "@" + digest
	}
	req := JobRequest{
		Name: run.JobName, Namespace: env.Namespace, Owner: env.ControllerRef(), Suite: suite,
		Image: image, ServiceAccount: sa, HelperImage: p.e.HelperImage,
		Labels: map[string]string{v1alpha1.LabelEnvironment: v1alpha1.LabelValue(env.Name), v1alpha1.LabelRole: v1alpha1.RoleTest, v1alpha1.LabelSuite: suite.Name,
			v1alpha1.LabelRun: strconv.FormatInt(run.Number, 10)},
		Env: []corev1.EnvVar{{Name: "DEVLOOP_NAMESPACE", Value: env.Namespace}, {Name: "DEVLOOP_ENVIRONMENT", Value: env.Name},
			{Name: "DEVLOOP_SUITE", Value: suite.Name}, {Name: "DEVLOOP_RUN", Value: strconv.FormatInt(run.Number, 10)}},
	}
	if suite.Source != "" {
		ref, ok := p.in.Sources.Ref(suite.Source)
		if !ok {
			return nil, fmt.Errorf("source %s is not resolved", suite.Source)
		}
		req.Source = &ref
		req.SourceSecret = env.Spec.SourceSecretName(suite.Source)
	}
	job, err := Job(req)
	if err != nil {
		return nil, err
	}
	withParams(job, run.Params)
	if share, ok := pods.SuiteCacheShare(env, suite); ok {
		withSharedCache(job, share)
		withGoCacheProg(job, share, p.e.TeamCache.For(sa), p.e.HelperImage)
	} else if suite.Cache != nil {
		withCache(job, CacheClaimName(env.Name, suite.Name))
	}
	return job, nil
}

// create creates a committed run's Job as the environment's
// ServiceAccount. A refusal ends the run with Error naming who was refused
// what; other failures are retried.
func (p *testPass) create(ctx context.Context, cl client.Client, idErr error, job *batchv1.Job) error {
	suite := job.Labels[v1alpha1.LabelSuite]
	st := p.testStatus(suite)
	var run *v1alpha1.TestRun
	for i := range st.Runs {
		if st.Runs[i].JobName == job.Name {
			run = &st.Runs[i]
		}
	}
	if run == nil {
		return nil
	}
	if idErr != nil {
		p.end(suite, run, v1alpha1.ResultError, "no identity to run the test job as: "+idErr.Error())
		p.flushNotes()
		return nil
	}
	// The source's Secret is mounted only if the ServiceAccount may read
	// it itself (a pinned source's is otherwise never read as it).
	var unreadable *pods.UnreadableSecretError
	if err := pods.CheckSecretsReadable(ctx, cl, job.Namespace, pods.SecretNames(&job.Spec.Template.Spec)...); errors.As(err, &unreadable) {
		p.end(suite, run, v1alpha1.ResultError, message.Truncate(err.Error(), 1000))
		p.flushNotes()
		return nil
	} else if err != nil {
		return fmt.Errorf("test job %s: %w", job.Name, err)
	}
	if err := p.ensureCache(ctx, cl, job); err != nil {
		var notOurs *notOursError
		if !errors.As(err, &notOurs) && !apierrors.IsForbidden(err) {
			return fmt.Errorf("test job %s: %w", job.Name, err)
		}
		p.end(suite, run, v1alpha1.ResultError, message.Truncate(err.Error(), 1000))
		p.flushNotes()
		return nil
	}
	err := cl.Create(ctx, job)
	switch {
	case apierrors.IsAlreadyExists(err):
		// Created by an earlier reconcile that stopped before recording
		// the start.
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
		user := p.in.Tenant.Describe()
		p.end(suite, run, v1alpha1.ResultError, fmt.Sprintf("cannot create job %s as %s: %v", job.Name, user, err))
		p.flushNotes()
		return nil
	case err != nil:
		return fmt.Errorf("creating test job %s: %w", job.Name, err)
	}
	run.StartTime = &metav1.Time{Time: p.now}
	log.FromContext(ctx).Info("started test run", "suite", suite, "run", run.Number, "job", job.Name)
	p.runEvent(corev1.EventTypeNormal, v1alpha1.ReasonTestStarted, job.Name,
		fmt.Sprintf("%s #%d started in job %s (%s)", suite, run.Number, job.Name, run.Trigger))
	return nil
}

// flushNotes emits notes queued after the commit.
func (p *testPass) flushNotes() {
	for _, n := range p.notes {
		n()
	}
	p.notes = nil
}

// finished queues the event and metrics of a run that ended.
func (p *testPass) finished(suite string, run *v1alpha1.TestRun) {
	r := *run
	env := p.env
	p.notes = append(p.notes, func() {
		RunsTotal.WithLabelValues(env.Namespace, env.Name, suite, string(r.Result)).Inc()
		took := ""
		if r.StartTime != nil && r.CompletionTime != nil {
			d := r.CompletionTime.Sub(r.StartTime.Time)
			RunDuration.WithLabelValues(env.Namespace, env.Name, suite).Observe(d.Seconds())
			took = " after " + d.Round(time.Second).String()
		}
		typ, reason := corev1.EventTypeWarning, v1alpha1.ReasonTestFailed
		switch r.Result {
		case v1alpha1.ResultPassed:
			typ, reason = corev1.EventTypeNormal, v1alpha1.ReasonTestPassed
		case v1alpha1.ResultCancelled:
			typ, reason = corev1.EventTypeNormal, v1alpha1.ReasonTestCancelled
		}
		note := fmt.Sprintf("%s #%d %s%s", suite, r.Number, r.Result, took)
		if r.ExitCode != nil && *r.ExitCode != 0 {
			note += fmt.Sprintf(" (exit code %d)", *r.ExitCode)
		}
		if r.Message != "" {
			note += ": " + r.Message
		} else if last := message.LastLine(r.LogTail); last != "" && r.Result != v1alpha1.ResultPassed {
			note += ": " + last
		}
		p.runEvent(typ, reason, r.JobName, note)
	})
}

// runEvent is the event of a run's start or end, related to its Job. The
// events API merges the events of one object with the same reason and
// action into one series whatever their notes say (the note is not in its
// key): three suites started by one trigger showed as one "x2" and the
// third never appeared. The Job, different for every run, keeps each its
// own event.
func (p *testPass) runEvent(typ, reason, jobName, note string) {
	if p.e.Events == nil {
		return
	}
	var related runtime.Object
	if jobName != "" {
		related = &batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
			ObjectMeta: metav1.ObjectMeta{Namespace: p.env.Namespace, Name: jobName}}
	}
	p.e.Events.Eventf(p.env, related, typ, reason, "RunTest", "%s", message.Truncate(note, message.MaxEventNote))
}

func (p *testPass) event(typ, reason, action, note string) {
	if p.e.Events != nil {
		p.e.Events.Eventf(p.env, nil, typ, reason, action, "%s", message.Truncate(note, message.MaxEventNote))
	}
}

// logTail is the end of a test container's log, at most 4 KiB, read as
// the environment's tenant when LogsFor says how: status shows it to
// whoever may read the DevEnvironment, so it must hold nothing the
// tenant could not read itself.
func (e *Engine) logTail(ctx context.Context, t *identity.Tenant, namespace, pod, container string) string {
	return Tail(pods.TailFor(ctx, e.LogsFor, e.Logs, t, namespace, pod, container, 200), MaxLogTail)
}

// imagesUnderTest are the digests a run tests: the images of the
// components the suite depends on, and its own built image.
func imagesUnderTest(env *v1alpha1.DevEnvironment, suite *v1alpha1.TestSuite) map[string]string {
	images := map[string]string{}
	for _, d := range suite.DependsOn {
		if st := env.Status.Component(d); st != nil {
			for _, img := range st.Images {
				if img.Digest != "" {
					images[img.Name] = img.Digest
				}
			}
		}
	}
	if b := suite.Image.Built; b != "" {
		if _, ist := env.BuiltImage(b); ist != nil && ist.Digest != "" {
			images[b] = ist.Digest
		}
	}
	if len(images) == 0 {
		return nil
	}
	return images
}

// componentName is c's name, or "" for none.
func componentName(c *v1alpha1.Component) string {
	if c == nil {
		return ""
	}
	return c.Name
}
