package timeline

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// The engines record step times through the reconcile's context, so no
// engine signature carries the recorder: a context without one records
// nothing (the tooling, tests of one engine).

type envKey struct{}
type componentKey struct{}

type envHandle struct {
	r   *Recorder
	uid types.UID
}

// WithEnv makes ctx record the steps of environment uid's change in
// flight into r.
func WithEnv(ctx context.Context, r *Recorder, uid types.UID) context.Context {
	if r == nil {
		return ctx
	}
	return context.WithValue(ctx, envKey{}, envHandle{r: r, uid: uid})
}

// InComponent makes the steps recorded through ctx belong to part within
// what ctx already names: a component, then component/image.
func InComponent(ctx context.Context, part string) context.Context {
	if c, _ := ctx.Value(componentKey{}).(string); c != "" {
		part = c + "/" + part
	}
	return context.WithValue(ctx, componentKey{}, part)
}

// Mark records step name of ctx's component from start to now. Use it
// as `defer timeline.Mark(ctx, timeline.Push, time.Now())`.
func Mark(ctx context.Context, name StepName, start time.Time) {
	h, ok := ctx.Value(envKey{}).(envHandle)
	if !ok {
		return
	}
	c, _ := ctx.Value(componentKey{}).(string)
	h.r.Record(h.uid, name, c, start, time.Now())
}

// OfEnvironment makes the steps recorded through ctx the environment's
// own (Fetch), whatever component ctx names.
func OfEnvironment(ctx context.Context) context.Context {
	return context.WithValue(ctx, componentKey{}, "")
}
