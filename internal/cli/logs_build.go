package cli

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// buildTarget is an image's latest build, as status names it: a builder
// Job, or a warm builder pod (run.keepWarm) whose build container's log
// holds every build it ran, each from when status says it started.
type buildTarget struct {
	env, component, image string
	// Set by resolve from the environment's status.
	name  string
	warm  bool
	since *metav1.Time
}

// imageBuildTarget checks COMPONENT/IMAGE against the spec: the image must
// have a run step (an image without one is assembled in the operator).
func imageBuildTarget(env *v1alpha1.DevEnvironment, word, comp, image string) (*logsTarget, error) {
	c := env.Spec.Component(comp)
	if c == nil {
		return nil, fmt.Errorf("devenvironment/%s has no component %q (in %q, COMPONENT/IMAGE names an image's build)", env.Name, comp, word)
	}
	var spec *v1alpha1.ImageSpec
	for i := range c.Images {
		if c.Images[i].Name == image {
			spec = &c.Images[i]
		}
	}
	// Status may still name the build of an image the spec has since
	// dropped or assembles in the operator now.
	ist := env.Status.Component(comp).Image(image)
	built := ist != nil && ist.Build != nil && ist.Build.Job != ""
	switch {
	case built:
	case spec == nil:
		return nil, fmt.Errorf("component %s has no image %q (see `kubectl devloop status %s`)", comp, image, env.Name)
	case spec.Run == nil:
		return nil, fmt.Errorf("image %s of component %s has no run step: it is assembled in the operator, whose log has its build", image, comp)
	}
	return &logsTarget{what: "build of " + word, build: &buildTarget{env: env.Name, component: comp, image: image}}, nil
}

// resolve reads the environment again and returns the build's status,
// nil while the image has no build yet.
func (b *buildTarget) resolve(ctx context.Context, s *session) (*v1alpha1.BuildStatus, error) {
	env, err := s.getEnv(ctx, b.env)
	if err != nil {
		return nil, err
	}
	ist := env.Status.Component(b.component).Image(b.image)
	if ist == nil || ist.Build == nil || ist.Build.Job == "" {
		return nil, nil
	}
	b.name, b.since = ist.Build.Job, ist.Build.StartTime
	b.warm = false
	if c := env.Spec.Component(b.component); c != nil {
		for _, img := range c.Images {
			if img.Name == b.image && img.Run != nil && img.Run.KeepWarm {
				b.warm = true
			}
		}
	}
	return ist.Build, nil
}

// pods are the pods of the build: the builder Job's, or the warm builder.
func (b *buildTarget) pods(ctx context.Context, s *session, ns string) ([]corev1.Pod, error) {
	st, err := b.resolve(ctx, s)
	if err != nil || st == nil {
		return nil, err
	}
	if !b.warm {
		return s.podsOf(ctx, ns, []v1alpha1.ObjectRef{{Group: "batch", Version: "v1", Kind: "Job", Namespace: ns, Name: b.name}})
	}
	pod := &corev1.Pod{}
	err = s.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: b.name}, pod)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading warm builder pod %s: %w", b.name, err)
	}
	return []corev1.Pod{*pod}, nil
}

// logOptions are what is read of a build's pods: a warm builder's build
// container (where the build command's output goes) from the build's
// start, unless --container says otherwise.
func (b *buildTarget) logOptions(f *logsFlags) (container string, since *metav1.Time) {
	if !b.warm {
		return f.container, nil
	}
	if f.container == "" {
		return v1alpha1.ContainerWarmBuild, b.since
	}
	return f.container, b.since
}

// followUntilEnded cancels a follow of a warm build once status says the
// build ended (a warm builder's container runs on, so its log never
// ends), leaving a moment for the last lines to arrive, and says how it
// ended.
func (a *app) followUntilEnded(ctx context.Context, s *session, target *buildTarget, cancel context.CancelFunc) {
	defer cancel()
	b := *target // resolved here while the streams read target
	since := b.since
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(a.opts.PollInterval):
		}
		st, err := b.resolve(ctx, s)
		if err != nil {
			continue
		}
		if st != nil && st.Result == v1alpha1.BuildRunning && st.StartTime.Equal(since) {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		switch {
		case st == nil || !st.StartTime.Equal(since):
			fmt.Fprintf(a.errOut(), "the build of %s/%s was replaced by a newer one: run logs again to follow it\n", b.component, b.image)
		case st.ExitCode != nil:
			fmt.Fprintf(a.errOut(), "build %s (exit code %d)\n", st.Result, *st.ExitCode)
		default:
			fmt.Fprintf(a.errOut(), "build %s\n", st.Result)
		}
		return
	}
}
