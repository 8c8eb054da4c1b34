package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// printLabelledLogs is `logs ENV -l LABEL`: the pods of every component
// with the label (components[].labels), together (lines prefixed by pod
// and container when there are several). Components without status yet
// or turned off have no pods and are skipped; --follow waits until one
// has pods.
func (a *app) printLabelledLogs(ctx context.Context, s *session, env *v1alpha1.DevEnvironment, label string, f *logsFlags) error {
	var names []string
	for _, c := range env.Spec.Components {
		if slices.Contains(c.Labels, label) {
			names = append(names, c.Name)
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("-l %s: no component of devenvironment/%s has that label; labels in use: %s", label, env.Name, labelsInUse(env))
	}
	what := "components " + strings.Join(names, ", ")
	p := newProgress(a.errOut(), a.opts.ProgressInterval)
	for {
		var pods []corev1.Pod
		for _, n := range names {
			if env.Status.Component(n) == nil {
				continue
			}
			found, err := a.targetPods(ctx, s, env, &logsTarget{what: "component " + n, component: n})
			if err != nil {
				return err
			}
			for _, pod := range found {
				if !slices.ContainsFunc(pods, func(q corev1.Pod) bool { return q.Namespace == pod.Namespace && q.Name == pod.Name }) {
					pods = append(pods, pod)
				}
			}
		}
		if len(pods) > 0 {
			return a.streamPods(ctx, s, pods, f, streamOptions{container: f.container})
		}
		if !f.follow {
			return fmt.Errorf("%s (label %s) have no pods (yet): add --follow to wait for them", what, label)
		}
		p.show("waiting for the pods of " + what)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(a.opts.PollInterval):
		}
		var err error
		if env, err = s.getEnv(ctx, env.Name); err != nil {
			return err
		}
	}
}
