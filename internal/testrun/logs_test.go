package testrun

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/pods"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// TestLogTailIsReadAsTheTenant: a test pod's log shown in status is
// requested as the environment's ServiceAccount, not the operator, so it
// shows nothing the tenant could not read itself.
func TestLogTailIsReadAsTheTenant(t *testing.T) {
	api := testenv.ServeLog(t, "team", "tests-unit-1-x", "ok  \tgithub.com/x/y\t0.3s\n")
	id := &identity.Identity{Config: &rest.Config{Host: api.URL}}
	env := &v1alpha1.DevEnvironment{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "tests"}}
	env.Spec.ServiceAccountName = "runner"
	e := &Engine{LogsFor: pods.TenantLogs}
	got := e.logTail(context.Background(), id.For(env), "team", "tests-unit-1-x", "test")
	if got != "ok  \tgithub.com/x/y\t0.3s\n" {
		t.Errorf("tail %q", got)
	}
	if users := api.Users(); len(users) != 1 || users[0] != "system:serviceaccount:team:runner" {
		t.Errorf("log requests made as %q, want once as system:serviceaccount:team:runner", users)
	}
}
