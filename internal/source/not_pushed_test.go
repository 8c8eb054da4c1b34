package source

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/test/builder"
)

// TestOnlyAnUnpushedTagIsWaitedFor: a tag the registry does not have, in
// a repository that exists or not, waits for a push; a registry that
// refuses the credentials, a plain-HTTP registry not said insecure, or
// one that is down keep their classes (Stalled, or retried with backoff).
func TestOnlyAnUnpushedTagIsWaitedFor(t *testing.T) {
	reg := newOCIRegistry(t, gzipped(t, tarOf(t, tfile("a.txt", "a"))))
	denied := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("WWW-Authenticate", `Basic realm="registry"`)
		http.Error(w, "no", http.StatusUnauthorized)
	}))
	defer denied.Close()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	}))
	defer down.Close()

	for _, tc := range []struct {
		name  string
		src   v1alpha1.Source
		waits bool
	}{
		{"tag not pushed", ociSource(reg.repo, "next", "", true), true},
		{"repository not made", ociSource(reg.host+"/team-a/src/new", "dev", "", true), true},
		{"credentials refused", ociSource(hostOf(denied)+"/x/y", "dev", "", true), false},
		{"plain HTTP not said insecure", ociSource(reg.host+"/team-a/src/new", "dev", "", false), false},
		{"registry down", ociSource(hostOf(down)+"/x/y", "dev", "", true), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := builder.Env(testNamespace, "dev").Source(tc.src).Obj()
			_, err := newFetcher(t).Resolve(context.Background(), testNamespace, tc.src)
			if err == nil {
				t.Fatal("resolved")
			}
			waiting, ok := waitingForPush(env, 0, err)
			if ok != tc.waits {
				t.Fatalf("waits for a push: %v, want %v (%v)", ok, tc.waits, err)
			}
			if !ok {
				return
			}
			if waiting.Reason != v1alpha1.ReasonWaiting || waiting.RequeueAfter <= 0 || fault.AsWaiting(waiting) == nil {
				t.Errorf("waiting %+v", waiting)
			}
			repo := tc.src.OCI.Repository
			if want := "spec.sources[0] (local): waiting for the first push to " + repo + ":" + tc.src.OCI.Tag; !strings.HasPrefix(waiting.Error(), want) {
				t.Errorf("message %q, want it to start with %q", waiting.Error(), want)
			}
		})
	}
}
