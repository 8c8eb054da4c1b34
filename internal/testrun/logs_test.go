package testrun

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/pods"
)

// TestLogTailIsReadAsTheTenant: a test pod's log shown in status is
// requested as the environment's ServiceAccount, not the operator, so it
// shows nothing the tenant could not read itself.
func TestLogTailIsReadAsTheTenant(t *testing.T) {
	var mu sync.Mutex
	var asUser []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/namespaces/team/pods/tests-unit-1-x/log" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		asUser = append(asUser, r.Header.Get("Impersonate-User"))
		mu.Unlock()
		_, _ = io.WriteString(w, "ok  \tgithub.com/x/y\t0.3s\n")
	}))
	defer api.Close()

	id := &identity.Identity{Config: &rest.Config{Host: api.URL}}
	env := &v1alpha1.DevEnvironment{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "tests"}}
	env.Spec.ServiceAccountName = "runner"
	e := &Engine{LogsFor: pods.TenantLogs}
	got := e.logTail(context.Background(), id.For(env), "team", "tests-unit-1-x", "test")
	if got != "ok  \tgithub.com/x/y\t0.3s\n" {
		t.Errorf("tail %q", got)
	}
	if len(asUser) != 1 || asUser[0] != "system:serviceaccount:team:runner" {
		t.Errorf("log requests made as %q, want once as system:serviceaccount:team:runner", asUser)
	}
}
