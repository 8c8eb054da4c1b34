package teamcache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// entry is a cache entry as the go command would put it: an action ID
// and a body whose SHA-256 is its output ID.
type testEntry struct {
	action, output, body []byte
}

func newEntry(action, body string) testEntry {
	a := sha256.Sum256([]byte(action))
	o := sha256.Sum256([]byte(body))
	return testEntry{action: a[:], output: o[:], body: []byte(body)}
}

func put(t *testing.T, c *Client, e testEntry) {
	t.Helper()
	if err := c.Put(context.Background(), e.action, e.output, bytes.NewReader(e.body), int64(len(e.body))); err != nil {
		t.Fatalf("put: %v", err)
	}
}

// get is what c reads for e's action: the body and where it came from,
// "" on a miss.
func get(t *testing.T, c *Client, e testEntry) (body, from string) {
	t.Helper()
	var buf bytes.Buffer
	_, from, miss, err := c.Get(context.Background(), e.action, &buf)
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if miss {
		return "", ""
	}
	return buf.String(), from
}

// Two tenants in two namespaces: B names A in spec.cache.readFrom and
// may read A's cache (readcache on A); C names A too but may not. The service
// runs as the operator under the chart's ClusterRole and knows callers
// only by their pods' tokens.
func TestReadFromIsTrustedAndOneWay(t *testing.T) {
	ctx := context.Background()
	svc, srv := newService(t)
	a := newTenantEnv(t, "cache-a-", srv)
	b := newTenantEnv(t, "cache-b-", srv, sourceOf(a))
	c := newTenantEnv(t, "cache-c-", srv, sourceOf(a))
	grantReadCache(t, a, b)

	shared := newEntry("compile k8s.io/client-go/informers", "compiled by A")
	put(t, a.client, shared)

	// B reads A's entry by name, and says where it came from.
	body, from := get(t, b.client, shared)
	if body != "compiled by A" || from != a.env.Namespace+"/dev" {
		t.Fatalf("B read %q from %q, want A's entry from %s/dev", body, from, a.env.Namespace)
	}

	// B's writes go into B's own cache only: A never reads them, not for
	// a new action and not for the action A already answers.
	poison := newEntry("compile main", "written by B")
	put(t, b.client, poison)
	if body, from := get(t, a.client, poison); body != "" {
		t.Fatalf("A read B's entry %q (from %s): A does not name B", body, from)
	}
	overwrite := testEntry{action: shared.action, body: []byte("B's answer for A's action")}
	sum := sha256.Sum256(overwrite.body)
	overwrite.output = sum[:]
	put(t, b.client, overwrite)
	if body, _ := get(t, a.client, shared); body != "compiled by A" {
		t.Fatalf("A read %q for its own action after B wrote it: B wrote into A's cache", body)
	}
	// B's own entry now comes first for B.
	if body, from := get(t, b.client, shared); body != string(overwrite.body) || from != b.env.Namespace+"/dev" {
		t.Fatalf("B read %q from %q, want its own entry first", body, from)
	}

	// C names A but may not readcache it: the service reads nothing of A for C,
	// and the check the reconcile stalls on names the field.
	if body, from := get(t, c.client, shared); body != "" {
		t.Fatalf("C read %q from %s without readcache on A", body, from)
	}
	_, err := CheckReadFrom(ctx, svc.Reviewer, c.env, "builder")
	var refused *ReadRefusedError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "spec.cache.readFrom[0]") {
		t.Fatalf("CheckReadFrom for C: %v, want a refusal naming spec.cache.readFrom[0]", err)
	}
	t.Logf("C refused: %v", err)
	if from, err := CheckReadFrom(ctx, svc.Reviewer, b.env, "builder"); err != nil || len(from) != 1 || from[0] != (Env{Namespace: a.env.Namespace, Name: "dev"}) {
		t.Fatalf("CheckReadFrom for B: %v %v, want A", from, err)
	}
}

// Only a token of the cache's audience, bound to a pod of the environment
// running as the environment's ServiceAccount, is a caller.
func TestCallerMustBeTheEnvironmentsBuilderPod(t *testing.T) {
	_, srv := newService(t)
	a := newTenantEnv(t, "cache-caller-", srv)
	e := newEntry("x", "y")

	cases := map[string]*Client{
		// The same pod's token for another audience (the API server's).
		"other audience": {URL: srv.URL, TokenFile: podToken(t, a.pod, "https://kubernetes.default.svc")},
		// A pod labelled with the environment but running as another
		// ServiceAccount of the namespace.
		"other ServiceAccount": func() *Client {
			sa := "intruder"
			createServiceAccount(t, a.env.Namespace, sa)
			pod := builderPod(t, a.env.Namespace, a.env.Name, sa)
			return &Client{URL: srv.URL, TokenFile: podToken(t, pod, DefaultAudience)}
		}(),
		// A pod of the right ServiceAccount naming no environment.
		"unlabelled pod": func() *Client {
			pod := builderPod(t, a.env.Namespace, "", "builder")
			return &Client{URL: srv.URL, TokenFile: podToken(t, pod, DefaultAudience)}
		}(),
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			err := c.Put(context.Background(), e.action, e.output, bytes.NewReader(e.body), int64(len(e.body)))
			var se *StatusError
			if !errors.As(err, &se) || se.Code != 401 {
				t.Fatalf("put: %v, want 401", err)
			}
		})
	}
	// The environment's own pod is.
	put(t, a.client, e)
}

// A body that does not hash to its output ID is refused when written,
// and one changed on disk afterwards is removed, never served.
func TestCorruptEntriesAreRefused(t *testing.T) {
	svc, srv := newService(t)
	a := newTenantEnv(t, "cache-corrupt-", srv)
	b := newTenantEnv(t, "cache-corrupt-", srv, sourceOf(a))
	grantReadCache(t, a, b)

	lie := newEntry("compile fmt", "the real object")
	lie.body = []byte("something else")
	err := a.client.Put(context.Background(), lie.action, lie.output, bytes.NewReader(lie.body), int64(len(lie.body)))
	var se *StatusError
	if !errors.As(err, &se) || se.Code != 400 {
		t.Fatalf("put of a body not matching its output ID: %v, want 400", err)
	}

	e := newEntry("compile strings", "the object")
	put(t, a.client, e)
	file := filepath.Join(svc.Store.Root, a.env.Namespace, "dev", hex.EncodeToString(e.action))
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, bytes.Replace(data, []byte("the object"), []byte("THE OBJECT"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	if body, _ := get(t, b.client, e); body != "" {
		t.Fatalf("B read %q, an entry changed on disk", body)
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the changed entry is still there: %v", err)
	}
}
