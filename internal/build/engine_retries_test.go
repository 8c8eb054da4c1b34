package build

import (
	"context"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/engine"
)

// TestJobFailuresCountPerJobAndEnvironmentAndAreForgotten: a builder Job
// is counted once however many reconciles read it failed, the next Job of
// its name counts again (the delay doubles), another environment's Job of
// the same name counts apart, and a deleted environment's counts are
// dropped.
func TestJobFailuresCountPerJobAndEnvironmentAndAreForgotten(t *testing.T) {
	e := &Engine{}
	env := func(uid string) *v1alpha1.DevEnvironment {
		return &v1alpha1.DevEnvironment{ObjectMeta: metav1.ObjectMeta{Name: "dev", Namespace: "team-" + uid, UID: types.UID(uid)}}
	}
	a, b := &imageBuilds{e: e, env: env("a")}, &imageBuilds{e: e, env: env("b")}
	job := func(uid string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "dev-api-build", UID: types.UID(uid)}}
	}
	a.countJobFailure(job("1"))
	if n := a.countJobFailure(job("1")); n != 1 {
		t.Errorf("one Job read failed twice counts %d, want 1", n)
	}
	if n := a.countJobFailure(job("2")); n != 2 {
		t.Errorf("the second Job of the name counts %d, want 2", n)
	}
	if d := jobRetryDelayAfter(2); d != 2*jobRetryDelay {
		t.Errorf("delay after two failures %s, want %s", d, 2*jobRetryDelay)
	}
	if n := b.countJobFailure(job("3")); n != 1 {
		t.Errorf("another environment's Job of the same name counts %d, want 1", n)
	}
	if err := e.Finalize(context.Background(), engine.Request{Env: a.env}); err != nil {
		t.Fatal(err)
	}
	if n := a.countJobFailure(job("4")); n != 1 {
		t.Errorf("after the environment was deleted its Job counts %d, want 1 (counts not forgotten)", n)
	}
}
