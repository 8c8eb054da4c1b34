package cli

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// pathRecorder records the paths of the requests a plugin run sends.
type pathRecorder struct {
	mu    sync.Mutex
	paths []string
	next  http.RoundTripper
}

func (r *pathRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.paths = append(r.paths, req.Method+" "+req.URL.Path)
	r.mu.Unlock()
	return r.next.RoundTrip(req)
}

func (r *pathRecorder) discovery() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, p := range r.paths {
		path := strings.TrimPrefix(p, "GET ")
		if path == "/api" || path == "/apis" || path == "/api/v1" || strings.Count(path, "/") == 3 && strings.HasPrefix(path, "/apis/") {
			out = append(out, p)
		}
	}
	return out
}

// TestAFollowAsksNoDiscovery: reading and following an environment asks
// the API server nothing about its API groups first (issue 46: each
// discovery request is a round trip, a link's across a real network,
// before a push's first read): the plugin knows where DevEnvironments and
// the core kinds it reads live.
func TestAFollowAsksNoDiscovery(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "team", teamSpec())
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		env.Status.ObservedGeneration = env.Generation
		env.Status.Conditions = []metav1.Condition{operatorCondition(env, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSucceeded, "ready")}
	})
	rec := &pathRecorder{}
	opts := testOptions()
	opts.wrapTransport = func(rt http.RoundTripper) http.RoundTripper { rec.next = rt; return rec }
	out, errOut, wait := pluginInBackground(t, opts, "wait", "team", "-n", ns)
	if code := wait(); code != 0 {
		t.Fatalf("wait exited %d\n%s%s", code, out.String(), errOut.String())
	}
	if d := rec.discovery(); len(d) > 0 {
		t.Fatalf("discovery requests before the environment was read: %v", d)
	}
	if len(rec.paths) == 0 {
		t.Fatal("no request recorded: the recorder is not in the plugin's transport")
	}
}

// TestAMissingEnvironmentIsStillNamed: with DevEnvironments mapped
// without discovery, a missing one is still named as missing (its 404 is
// checked against discovery, which finds the API served).
func TestAMissingEnvironmentIsStillNamed(t *testing.T) {
	r := plugin(t, "wait", "team", "-n", "default", "--context", contextName)
	if r.code == 0 || !strings.Contains(r.err, `devenvironment "team" not found in namespace "default"`) {
		t.Fatalf("want a missing environment named, got\n%s", r)
	}
}
