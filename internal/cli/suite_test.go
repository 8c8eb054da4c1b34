package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/test/builder"
)

// The envtest suite: a real kube-apiserver and etcd with the CRD, and the
// plugin run in-process through its cobra root with a kubeconfig written
// for an admin user, as a user's kubectl would have it.
var (
	k8s         client.Client
	restConfig  *rest.Config
	kubeconfig  string
	contextName string
	testEnv     *envtest.Environment
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	// The user's own settings and allow-list must not leak into tests.
	tmp, err := os.MkdirTemp("", "devloop-cli-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(tmp, "config"))
	os.Unsetenv(AllowedContextsEnv)
	os.Setenv("DOCKER_CONFIG", filepath.Join(tmp, "docker"))
	// push remembers what it pushed in the user's cache directory.
	os.Setenv("XDG_CACHE_HOME", filepath.Join(tmp, "cache"))
	return testenv.Run(m, func(env *testenv.Env) error {
		testEnv = env.Environment
		env.Cleanup(stopOperator)
		return writeAdminKubeconfig(env.Environment, filepath.Join(tmp, "kubeconfig"))
	})
}

// writeAdminKubeconfig writes a kubeconfig for an admin user to path, as
// a user's kubectl would have it, and connects the suite's client with it.
func writeAdminKubeconfig(env *envtest.Environment, path string) error {
	user, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	data, err := user.KubeConfig()
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return err
	}
	raw, err := clientcmd.Load(data)
	if err != nil {
		return err
	}
	kubeconfig, contextName, restConfig = path, raw.CurrentContext, user.Config()
	k8s, err = client.New(restConfig, client.Options{Scheme: scheme})
	return err
}

// syncBuffer is a bytes.Buffer safe for the plugin's goroutines and the
// test reading it at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// result is what one run of the plugin printed and returned.
type result struct {
	out, err string
	code     int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.code, r.out, r.err)
}

// testOptions polls fast and never colours.
func testOptions() Options {
	off := false
	return Options{PollInterval: 50 * time.Millisecond, ProgressInterval: time.Hour, Color: &off}
}

// plugin runs `kubectl devloop ARGS --kubeconfig <envtest>` in-process.
func plugin(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut syncBuffer
	code := startPlugin(ctx, nil, &out, &errOut, testOptions(), args...)()
	return result{out: out.String(), err: errOut.String(), code: code}
}

// pluginInBackground runs `kubectl devloop ARGS` with opts in a goroutine
// for at most a minute, for a test that acts while it runs: it returns
// the output so far and a wait for the exit code.
func pluginInBackground(t *testing.T, opts Options, args ...string) (out, errOut *syncBuffer, wait func() int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	out, errOut = &syncBuffer{}, &syncBuffer{}
	return out, errOut, startPlugin(ctx, nil, out, errOut, opts, args...)
}

// startPlugin runs the plugin in a goroutine; the returned function waits
// for its exit code.
func startPlugin(ctx context.Context, in io.Reader, out, errOut io.Writer, opts Options, args ...string) func() int {
	done := make(chan int, 1)
	streams := genericiooptions.IOStreams{In: in, Out: out, ErrOut: errOut}
	go func() {
		done <- Run(ctx, append(args, "--kubeconfig", kubeconfig), streams, opts)
	}()
	return func() int { return <-done }
}

// createEnv creates an environment and reads it back (generation set).
func createEnv(t *testing.T, ns, name string, spec v1alpha1.DevEnvironmentSpec) *v1alpha1.DevEnvironment {
	t.Helper()
	env := builder.Env(ns, name).Obj()
	env.Spec = spec // built with test/builder by the caller (teamSpec and the like)
	if err := k8s.Create(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	return env
}

// playOperator writes status as the operator would: the test stands in for
// it where only the plugin's side is under test.
func playOperator(t *testing.T, ns, name string, mutate func(env *v1alpha1.DevEnvironment)) {
	t.Helper()
	for range 10 {
		env := &v1alpha1.DevEnvironment{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, env); err != nil {
			t.Fatal(err)
		}
		mutate(env)
		err := k8s.Status().Update(context.Background(), env)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	t.Fatal("status update kept conflicting")
}

// operatorCondition is a condition as the operator writes it: for env's
// current generation, with its transition time now.
func operatorCondition(env *v1alpha1.DevEnvironment, typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: env.Generation, LastTransitionTime: metav1.Now()}
}

// waitUntil polls cond until it holds, and fails the test when a minute
// passes first; what says what was awaited.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// refusal is a command line the plugin must refuse, and what it must say.
type refusal struct {
	args []string
	want string
}

// expectRefusals runs each command line in namespace ns and checks that
// the plugin exits non-zero saying what it should on stderr.
func expectRefusals(t *testing.T, ns string, refusals []refusal) {
	t.Helper()
	for _, tc := range refusals {
		r := plugin(t, append(tc.args, "-n", ns)...)
		if r.code == 0 || !strings.Contains(r.err, tc.want) {
			t.Errorf("%v: want exit 1 saying %q, got %s", tc.args, tc.want, r)
		}
	}
}

func getEnv(t *testing.T, ns, name string) *v1alpha1.DevEnvironment {
	t.Helper()
	env := &v1alpha1.DevEnvironment{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, env); err != nil {
		t.Fatal(err)
	}
	return env
}
