package testenv

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// LogAPI is an API server that serves one pod container's log and records
// the user each request impersonated: what a test of "this log is read as
// the tenant" needs, without a kubelet.
type LogAPI struct {
	URL   string
	mu    sync.Mutex
	users []string
}

// ServeLog starts a LogAPI answering GET
// /api/v1/namespaces/<namespace>/pods/<pod>/log with body; it stops with
// the test.
func ServeLog(t testing.TB, namespace, pod, body string) *LogAPI {
	api := &LogAPI{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/namespaces/"+namespace+"/pods/"+pod+"/log" {
			http.NotFound(w, r)
			return
		}
		api.mu.Lock()
		api.users = append(api.users, r.Header.Get("Impersonate-User"))
		api.mu.Unlock()
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	api.URL = srv.URL
	return api
}

// Users are the users the log requests impersonated, in order ("" for a
// request made as itself).
func (a *LogAPI) Users() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.users...)
}
