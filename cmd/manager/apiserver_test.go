package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/devloop-dev/devloop/internal/testenv"
)

// The envtest API server is started by the first test that needs one and
// shared by the package's tests; the flag tests need none.
var (
	apiOnce     sync.Once
	apiEnv      *testenv.Env
	apiAdmin    client.Client
	apiOperator *rest.Config
	apiErr      error
)

func TestMain(m *testing.M) {
	// Started under the supervisor's name (helper_test.go),
	// this test binary is the supervisor, as main makes the manager.
	if code, ok := runAsSupervisor(); ok {
		os.Exit(code)
	}
	code := m.Run()
	if apiEnv != nil {
		if err := apiEnv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping envtest:", err)
		}
	}
	os.Exit(code)
}

// apiServer is the shared API server: the admin's client and the
// operator's connection, with exactly the chart's ClusterRole and the
// leader election Role it gives in devloop-system.
func apiServer(t *testing.T) (client.Client, *rest.Config) {
	t.Helper()
	apiOnce.Do(func() {
		ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
		if apiEnv, apiErr = testenv.StartEnv(); apiErr != nil {
			return
		}
		apiAdmin = apiEnv.Client
		ctx := context.Background()
		if apiOperator, apiErr = testenv.OperatorConfig(ctx, apiEnv.Environment, apiAdmin); apiErr != nil {
			return
		}
		apiErr = grantLeaderElection(ctx, apiAdmin)
	})
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	return apiAdmin, apiOperator
}

// grantLeaderElection gives the operator the chart's leader election Role
// (Leases in its namespace).
func grantLeaderElection(ctx context.Context, admin client.Client) error {
	ns := testenv.OperatorNamespace
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "devloop-leader-election"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
				Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "devloop-leader-election"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "devloop-leader-election"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: testenv.OperatorServiceAccount}}},
	}
	for _, o := range objs {
		if err := admin.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// startManager runs the operator as main does, from these flags, with
// the connection cfg, until the test ends.
func startManager(t *testing.T, cfg *rest.Config, args ...string) ctrl.Manager {
	t.Helper()
	args = append([]string{"--metrics-bind-address=0", "--health-probe-bind-address=0", "--work-dir=" + t.TempDir()}, args...)
	opts, err := parseFlags(args)
	if err != nil {
		t.Fatal(err)
	}
	opts.skipNameValidation = true
	mgr, err := newManager(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager %v: %v", args, err)
		}
	})
	return mgr
}

// statusWrites records the DevEnvironment status writes one operator
// instance makes, by environment, with their bodies: who reconciled what.
type statusWrites struct {
	mu     sync.Mutex
	bodies map[string][]string // namespace/name -> patch bodies
}

// connection is cfg with every status write recorded.
func (w *statusWrites) connection(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if key, ok := envStatusPath(req.URL.Path); ok && (req.Method == http.MethodPatch || req.Method == http.MethodPut) && req.Body != nil {
				body, err := io.ReadAll(req.Body)
				if err != nil {
					return nil, err
				}
				req = req.Clone(req.Context())
				req.Body = io.NopCloser(bytes.NewReader(body))
				w.mu.Lock()
				if w.bodies == nil {
					w.bodies = map[string][]string{}
				}
				w.bodies[key] = append(w.bodies[key], string(body))
				w.mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
	return c
}

// of is the status writes made for the environment ns/name.
func (w *statusWrites) of(ns, name string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.bodies[ns+"/"+name]...)
}

// envStatusPath is namespace/name of a DevEnvironment status URL path.
func envStatusPath(p string) (string, bool) {
	// /apis/devloop.dev/v1alpha1/namespaces/NS/devenvironments/NAME/status
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	if len(parts) != 8 || parts[1] != "devloop.dev" || parts[5] != "devenvironments" || parts[7] != "status" {
		return "", false
	}
	return parts[4] + "/" + parts[6], true
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

const waitFor = 30 * time.Second
