package build

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

// TestBuildLogTailIsReadAsTheTenant: a failed build's log shown in status
// is requested as the environment's ServiceAccount, not the operator.
func TestBuildLogTailIsReadAsTheTenant(t *testing.T) {
	var mu sync.Mutex
	var asUser []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/namespaces/team/pods/web-build-x/log" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		asUser = append(asUser, r.Header.Get("Impersonate-User"))
		mu.Unlock()
		_, _ = io.WriteString(w, "main.go:3: undefined: x\n")
	}))
	defer api.Close()

	id := &identity.Identity{Config: &rest.Config{Host: api.URL}}
	env := &v1alpha1.DevEnvironment{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web"}}
	env.Spec.ServiceAccountName = "builder"
	s := (&Engine{LogsFor: pods.TenantLogs}).Session(env, id.For(env), nil)
	if got := s.logTail(context.Background(), "web-build-x", "build"); got != "main.go:3: undefined: x\n" {
		t.Errorf("tail %q", got)
	}
	if len(asUser) != 1 || asUser[0] != "system:serviceaccount:team:builder" {
		t.Errorf("log requests made as %q, want once as system:serviceaccount:team:builder", asUser)
	}
}
