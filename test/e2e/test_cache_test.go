//go:build e2e

package e2e

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testrun"
	. "github.com/devloop-dev/devloop/test/builder"
	. "github.com/devloop-dev/devloop/test/e2e/fixture"
)

// cachedModule is a small Go module whose tests compile the standard
// library's heavier packages (net/http, encoding/json, text/template)
// and a few local packages: what a cold build cache spends its time on.
var cachedModule = Files{
	"go.mod": GoModule("example.com/cached"),
	"api/api.go": `package api

import (
	"encoding/json"
	"net/http"
)

type Item struct {
	Name  string ` + "`json:\"name\"`" + `
	Count int    ` + "`json:\"count\"`" + `
}

// Handler serves items as JSON.
func Handler(items []Item) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(items)
	})
}
`,
	"api/api_test.go": `package api

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
)

func TestHandler(t *testing.T) {
	srv := httptest.NewServer(Handler([]Item{{Name: "a", Count: 2}}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got []Item
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || len(got) != 1 || got[0].Count != 2 {
		t.Fatalf("got %v, %v", got, err)
	}
}
`,
	"report/report.go": `package report

import (
	"strings"
	"text/template"

	"example.com/cached/api"
)

var tmpl = template.Must(template.New("r").Parse("{{range .}}{{.Name}}={{.Count}}\n{{end}}"))

// Render lists items one a line.
func Render(items []api.Item) (string, error) {
	var b strings.Builder
	err := tmpl.Execute(&b, items)
	return b.String(), err
}
`,
	"report/report_test.go": `package report

import (
	"testing"

	"example.com/cached/api"
)

func TestRender(t *testing.T) {
	got, err := Render([]api.Item{{Name: "a", Count: 1}})
	if err != nil || got != "a=1\n" {
		t.Fatalf("%q %v", got, err)
	}
}
`,
}

// TestTestCache runs a suite with tests[].cache twice: the second run
// compiles from the cache the first one filled (go test -count=1, so the
// tests themselves run again). Both durations are logged for
// docs/performance.md.
func TestTestCache(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := need(t)
	ns := namespace(t, "e2e-tcache")
	suite := GoTestSuite("unit", goImage, `go test -count=1 -run "${TEST_RUN:-.}" ./...`)
	suite.Params = []string{"TEST_RUN"}
	env := newEnv(ns, "cached").SourceRepository("cached-src").Tests(suite).Build()
	pushDir(t, env, sourceDir(t, cachedModule))
	g.Expect(c.Client.Create(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)

	runOnce := func(trigger string, n int64) *v1alpha1.TestRun {
		setTrigger(t, env, trigger)
		run := waitTestRun(t, key, "unit", n)
		g.Expect(run.Result).To(Equal(v1alpha1.ResultPassed), "run failed: "+run.Message+"\n"+run.LogTail)
		return run
	}
	took := func(r *v1alpha1.TestRun) time.Duration { return r.CompletionTime.Sub(r.StartTime.Time) }

	cold := runOnce("unit", 1)
	// The second run also carries a param: it reaches the container.
	warm := runOnce(testrun.FormatSelector("unit", []v1alpha1.EnvVar{{Name: "TEST_RUN", Value: "Test(Handler|Render)"}}), 2)
	g.Expect(warm.Params).To(Equal([]v1alpha1.EnvVar{{Name: "TEST_RUN", Value: "Test(Handler|Render)"}}))
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("go test ./... cold cache: %s (job %s); warm cache: %s (job %s); load average: %s",
		took(cold).Round(100*time.Millisecond), cold.JobName, took(warm).Round(100*time.Millisecond), warm.JobName, string(load))
	t.Logf("warm log tail:\n%s", warm.LogTail)

	pvc := &corev1.PersistentVolumeClaim{}
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: testrun.CacheClaimName(env.Name, "unit")}, pvc)).To(Succeed())
	g.Expect(metav1.IsControlledBy(pvc, env)).To(BeTrue())
}
