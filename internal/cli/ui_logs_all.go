package cli

import (
	"context"
	"sync"
	"time"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/ui"
)

// allLogs is the dashboard's combined log, Tilt's one pane: every
// component's pods (following rollouts, as podLogs does), every image's
// build and every suite's newest run, each line tagged with the resource
// it belongs to so the page can filter by resource. It reads status every
// poll interval and starts the log of a build or a run that appeared
// since, so a push's build, rollout and tests arrive in the one pane in
// the order they happen.
type allLogs struct {
	a       *app
	s       *session
	envName string
	emit    func(ui.LogLine)

	// streaming is what each resource's log reads: "pods" for a
	// component, the Job's name for a build or a run.
	streaming map[string]string
	wg        sync.WaitGroup
}

// allLogsPoll is the least time between the combined log's reads of the
// environment and of each component's pods: it follows every component
// at once, and N components polled at the plugin's follow interval (half
// a second) would cost the API server 4N requests a second.
const allLogsPoll = 2 * time.Second

func (l *allLogs) run(ctx context.Context) error {
	slow := *l.a
	slow.opts.PollInterval = max(slow.opts.PollInterval, allLogsPoll)
	l.a = &slow
	l.streaming = map[string]string{}
	defer l.wg.Wait()
	for {
		env, err := l.s.getEnv(ctx, l.envName)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		l.startNew(ctx, env)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(l.a.opts.PollInterval):
		}
	}
}

// startNew starts the logs status names that are not streaming yet.
func (l *allLogs) startNew(ctx context.Context, env *v1alpha1.DevEnvironment) {
	for _, c := range env.Spec.Components {
		res := "component/" + c.Name
		if l.streaming[res] == "" {
			l.streaming[res] = "pods"
			pl := &podLogs{a: l.a, s: l.s, envName: l.envName, target: &logsTarget{what: "component " + c.Name, component: c.Name}, emit: l.tagged(res)}
			l.wg.Go(func() { l.ended(res, pl.run(ctx, true)) })
		}
		for _, im := range c.Images {
			st := env.Status.Component(c.Name).Image(im.Name)
			if st == nil || st.Build == nil || st.Build.Job == "" {
				continue
			}
			l.startJob(ctx, env, "build/"+c.Name+"/"+im.Name, st.Build.Job, c.Name+"/"+im.Name, 0)
		}
	}
	for _, t := range env.Spec.Tests {
		if r := newestRunAfter(env, t.Name, 0); r != nil && r.JobName != "" {
			l.startJob(ctx, env, "test/"+t.Name, r.JobName, t.Name, r.Number)
		}
	}
}

// startJob follows a build's or a run's log once per Job.
func (l *allLogs) startJob(ctx context.Context, env *v1alpha1.DevEnvironment, res, job, word string, run int64) {
	if l.streaming[res] == job {
		return
	}
	target, err := logsTargetOf(env, word, run)
	if err != nil {
		return
	}
	l.streaming[res] = job
	emit := l.tagged(res)
	l.wg.Go(func() { l.ended(res, l.a.jobLogs(ctx, l.s, env, target, emit, &logsFlags{follow: true, tail: -1})) })
}

// ended notes in the pane why a resource's log stopped early.
func (l *allLogs) ended(res string, err error) {
	if err != nil {
		l.emit(ui.LogLine{Resource: res, Stream: "devloop", Text: err.Error(), Time: time.Now()})
	}
}

func (l *allLogs) tagged(res string) func(ui.LogLine) {
	return func(line ui.LogLine) {
		line.Resource = res
		l.emit(line)
	}
}
