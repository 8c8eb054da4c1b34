package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/internal/ui"
	"github.com/devloop-dev/devloop/test/browser"
	"github.com/devloop-dev/devloop/test/builder"
)

// requestCounter counts the API requests the dashboard makes, as LIST or
// WATCH of a resource.
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

var resourcePath = regexp.MustCompile(`/(?:api/v1|apis/[^/]+/[^/]+)(?:/namespaces/[^/]+)?/([a-z]+)$`)

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if m := resourcePath.FindStringSubmatch(r.URL.Path); m != nil && r.Method == http.MethodGet {
			verb := "LIST"
			// A watch with sendInitialEvents (client-go's WatchList) is the
			// list and the watch in one request.
			if r.URL.Query().Get("watch") == "true" {
				verb = "WATCH"
			}
			c.mu.Lock()
			c.counts[verb+" "+m[1]]++
			c.mu.Unlock()
		}
		return rt.RoundTrip(r)
	})
}

func (c *requestCounter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for k, v := range c.counts {
		out = append(out, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// tenComponents is an environment of ten manifests components in a chain.
func tenComponents() v1alpha1.DevEnvironmentSpec {
	b := fixtureEnv("", "").AppSource()
	for i := range 10 {
		opts := []builder.ComponentOption{builder.Manifests(fmt.Sprintf("deploy/%d", i))}
		if i > 0 {
			opts = append(opts, builder.DependsOn(fmt.Sprintf("c%d", i-1)))
		}
		b.Components(builder.Component(fmt.Sprintf("c%d", i), opts...))
	}
	return b.Spec()
}

// The dashboard over 50 environments of 10 components: the figures of
// docs/performance.md. It prints the first render, the status-change to
// page latency, the process's memory, and asserts one LIST and one WATCH
// per kind, not per environment.
func TestUIFiftyEnvironments(t *testing.T) {
	bctx := browser.Start(t)
	ns := testenv.Namespace(t, k8s, "ui-bench")
	for i := range 50 {
		name := fmt.Sprintf("env-%02d", i)
		createEnv(t, ns, name, tenComponents())
		playOperator(t, ns, name, func(env *v1alpha1.DevEnvironment) {
			for j := range 10 {
				env.Status.Components = append(env.Status.Components, v1alpha1.ComponentStatus{Name: fmt.Sprintf("c%d", j), Phase: v1alpha1.PhaseReady,
					Inventory: []v1alpha1.ObjectRef{{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: ns, Name: fmt.Sprintf("c%d", j)}}})
			}
			env.Status.ComponentsReady = "10/10"
			env.Status.Conditions = []metav1.Condition{operatorCondition(env, v1alpha1.ConditionReady, metav1.ConditionTrue, "Ready", "10/10 components ready")}
		})
	}

	counter := &requestCounter{counts: map[string]int{}}
	cfg := rest.CopyConfig(restConfig)
	cfg.WrapTransport = counter.wrap
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	out := &syncBuffer{}
	a := &app{opts: testOptions(), streams: genericIOStreams(out)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- a.serveUI(ctx, &session{config: cfg, client: c, clientset: cs, namespace: ns}, ui.Scope{Namespace: ns}, 0, false)
	}()
	var m []string
	waitUntil(t, "the dashboard's URL", func() bool { m = dashboardURL.FindStringSubmatch(out.String()); return m != nil })

	start := time.Now()
	if _, err := chromedp.Run(bctx, chromedp.Navigate(strings.TrimPrefix(m[0], "devloop dashboard: "))); err != nil {
		t.Fatal(err)
	}
	browser.WaitJS(t, bctx, "50 environments listed", `document.querySelectorAll('#envs tr[data-env]').length === 50`)
	firstRender := time.Since(start)

	var latencies, writes []time.Duration
	for i := range 10 {
		name := fmt.Sprintf("env-%02d", i*5)
		msg := fmt.Sprintf("rolling out c%d", i)
		var writing time.Time
		playOperator(t, ns, name, func(env *v1alpha1.DevEnvironment) {
			env.Status.Conditions = []metav1.Condition{
				operatorCondition(env, v1alpha1.ConditionReady, metav1.ConditionFalse, "Progressing", msg),
				operatorCondition(env, v1alpha1.ConditionReconciling, metav1.ConditionTrue, "Progressing", msg),
			}
			writing = time.Now()
		})
		// From the write's answer (the API server took the write, as the
		// operator sees it); writes[] is from before the request was sent.
		wrote := time.Now()
		browser.WaitJS(t, bctx, name+" Reconciling on the list", `(document.querySelector('tr[data-env="`+ns+`/`+name+`"] .msg') || {}).textContent === '`+msg+`'`)
		latencies = append(latencies, time.Since(wrote))
		writes = append(writes, wrote.Sub(writing))
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	sort.Slice(writes, func(i, j int) bool { return writes[i] < writes[j] })

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("50 environments × 10 components: first render %s; status change to page median %s, max %s (10 changes, from the write's answer; the status writes themselves took median %s, max %s)",
		firstRender.Round(time.Millisecond), latencies[len(latencies)/2].Round(time.Millisecond), latencies[len(latencies)-1].Round(time.Millisecond),
		writes[len(writes)/2].Round(time.Millisecond), writes[len(writes)-1].Round(time.Millisecond))
	t.Logf("memory: process RSS %s (the test binary: envtest client, chromedp and the dashboard), Go heap in use %d MiB", rss(), ms.HeapInuse>>20)
	t.Logf("API requests of the dashboard: %s", counter)

	// client-go lists with a watch that sends the initial objects first
	// (WatchList) where the server supports it, and with a LIST then a
	// WATCH otherwise: either way one of each at most, per kind.
	for _, kind := range []string{"devenvironments", "events", "configmaps"} {
		list, watch := counter.counts["LIST "+kind], counter.counts["WATCH "+kind]
		if list > 1 || watch != 1 {
			t.Errorf("%s: %d LIST and %d WATCH requests, want at most one LIST and one WATCH (per kind, not per environment)", kind, list, watch)
		}
	}
	cancel()
	var ee *ExitError
	if err := <-done; err != nil && !(errors.As(err, &ee) && ee.Code == 130) {
		t.Fatal(err)
	}
}

// rss reads the process's resident set size.
func rss() string {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			return strings.Join(strings.Fields(strings.TrimPrefix(line, "VmRSS:")), " ")
		}
	}
	return "unknown"
}
