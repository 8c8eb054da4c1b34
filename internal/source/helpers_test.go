package source

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
)

const testNamespace = "team-a"

// Test repositories live on local disk; the operator never allows that.
// An init, not TestMain: the package's TestMain is operatortest's
// (main_test.go), which cannot be imported from inside the package. The
// operator that TestMain runs shares the setting; its tests use no file
// URLs, and the CRD refuses them anyway.
func init() { allowFileURLs = true }

// newFetcher is a Fetcher with its own store, reading the given objects.
func newFetcher(t *testing.T, objs ...client.Object) *Fetcher {
	t.Helper()
	return &Fetcher{
		Reader:  fake.NewClientBuilder().WithObjects(objs...).Build(),
		Root:    t.TempDir(),
		Timeout: time.Minute,
	}
}

func secret(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// counting wraps a handler and counts the requests it serves, to show that
// a stored source is served without network.
type counting struct {
	h http.Handler
	n atomic.Int64
}

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.n.Add(1)
	c.h.ServeHTTP(w, r)
}

type errorClass int

const (
	anyError errorClass = iota
	permanent
	unavailable
)

func (c errorClass) String() string {
	return [...]string{"any", "permanent", "unavailable"}[c]
}

// expectError checks that err is of class c and its message holds every
// part of want, and none of the secret values.
func expectError(t *testing.T, err error, c errorClass, want []string, secrets ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want a %v error saying %q", c, want)
	}
	t.Logf("error: %v", err)
	switch {
	case c == permanent && !fault.IsPermanent(err):
		t.Errorf("error %q is not permanent", err)
	case c == unavailable && !fault.IsUnavailable(err):
		t.Errorf("error %q is not unavailable", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(err.Error(), s) {
			t.Errorf("error %q leaks a secret value", err)
		}
	}
}

// expectResolved checks a table case's Resolve: an error of class c saying
// every part of errs when the case names errors, else want. It says
// whether the case goes on.
func expectResolved(t *testing.T, ref Ref, err error, c errorClass, errs []string, want Ref) bool {
	t.Helper()
	if errs != nil {
		expectError(t, err, c, errs)
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	if ref != want {
		t.Errorf("got %+v\nwant %+v", ref, want)
	}
	return true
}

// withSecret is src reading its credentials from the Secret name (none
// when name is empty), whether src is a git or an OCI source.
func withSecret(src v1alpha1.Source, name string) v1alpha1.Source {
	if name == "" {
		return src
	}
	ref := &v1alpha1.LocalObjectReference{Name: name}
	switch {
	case src.Git != nil:
		git := *src.Git
		git.SecretRef = ref
		src.Git = &git
	case src.OCI != nil:
		oci := *src.OCI
		oci.SecretRef = ref
		src.OCI = &oci
	}
	return src
}

// writeFiles writes files (path: content) under dir, making the
// directories they need.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
