package build

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/engine"
	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/pods"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// TestBuildLogTailIsReadAsTheTenant: a failed build's log shown in status
// is requested as the environment's ServiceAccount, not the operator.
func TestBuildLogTailIsReadAsTheTenant(t *testing.T) {
	api := testenv.ServeLog(t, "team", "web-build-x", "main.go:3: undefined: x\n")
	id := &identity.Identity{Config: &rest.Config{Host: api.URL}}
	env := &v1alpha1.DevEnvironment{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web"}}
	env.Spec.ServiceAccountName = "builder"
	s := (&Engine{LogsFor: pods.TenantLogs}).sessionFor(engine.Request{Env: env, Tenant: id.For(env)})
	if got := s.logTail(context.Background(), "web-build-x", "build"); got != "main.go:3: undefined: x\n" {
		t.Errorf("tail %q", got)
	}
	if users := api.Users(); len(users) != 1 || users[0] != "system:serviceaccount:team:builder" {
		t.Errorf("log requests made as %q, want once as system:serviceaccount:team:builder", users)
	}
}
