package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/devloop-dev/devloop/internal/testfiles"
	"github.com/devloop-dev/devloop/internal/testregistry"
)

// push --watch pushes a change as soon as its debounce ends, also while
// the change before it is still followed: here the first change never
// rolls out (its Deployment has no controller in envtest, so component
// config stays Deploying and web waits for it), and the edit is pushed
// all the same, the old follow stopped with a line that says so.
func TestPushWatchPushesAChangeWhileTheLastIsFollowed(t *testing.T) {
	host := testregistry.Start(t)
	ns := operatorNamespace(t)
	name := uniqueName("unfinished")
	createEnv(t, ns, name, pushedSpec(host, name+"-src"))
	dir := appTreeFor(t, "<h1>v1</h1>", name)
	testfiles.Write(t, dir, map[string]string{"deploy/app.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: ` + name + `-app
spec:
  selector: {matchLabels: {app: ` + name + `}}
  template:
    metadata: {labels: {app: ` + name + `}}
    spec:
      containers: [{name: app, image: registry.test/never-runs:1}]
`})

	stdin, typed := io.Pipe()
	defer typed.Close()
	var out, errOut syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	exited := startPlugin(ctx, stdin, &out, &errOut, testOptions(), "push", dir, "--env", name, "--source", "app", "--watch", "--debounce", "100ms", "-n", ns)
	pushes := func() int { return strings.Count(out.String(), "pushed "+host) }
	waitUntil(t, "the first change followed, not Ready", func() bool {
		return pushes() == 1 && strings.Contains(out.String(), "config Deploying")
	})

	testfiles.Write(t, dir, map[string]string{"site/index.html": "<h1>v2</h1>"})
	waitUntil(t, "the edit pushed while the first change is followed", func() bool { return pushes() == 2 })
	if strings.Contains(out.String(), "Ready in") {
		t.Fatalf("the first change rolled out; the case needs it unfinished:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "no longer following the one before it") {
		t.Errorf("the stopped follow is not reported:\n%s", out.String())
	}
	if _, err := io.WriteString(typed, "q\n"); err != nil {
		t.Fatal(err)
	}
	if code := exited(); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errOut.String())
	}
	t.Logf("watch session:\n%s", out.String())
}

// TestPushWatchPushesFromTheEnvironmentItWatches: push --watch reads the
// environment once, when it starts; each later change is pushed from the
// version its watch of the environment keeps, without a read before the
// upload (issue 46: a round trip per change across a link). --no-follow
// and no port-forwards, so the only reads are the pushes' own.
func TestPushWatchPushesFromTheEnvironmentItWatches(t *testing.T) {
	host := testregistry.Start(t)
	ns := operatorNamespace(t)
	name := uniqueName("watched")
	createEnv(t, ns, name, pushedSpec(host, name+"-src"))
	dir := appTreeFor(t, "<h1>v1</h1>", name)

	rec := &pathRecorder{}
	opts := testOptions()
	opts.wrapTransport = func(rt http.RoundTripper) http.RoundTripper { rec.next = rt; return rec }
	stdin, typed := io.Pipe()
	defer typed.Close()
	var out, errOut syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	exited := startPlugin(ctx, stdin, &out, &errOut, opts, "push", dir, "--env", name, "--source", "app", "--watch", "--no-follow",
		"--port-forward=false", "--debounce", "100ms", "-n", ns)
	pushes := func() int { return strings.Count(out.String(), "pushed "+host) }
	waitUntil(t, "the first change pushed", func() bool { return pushes() == 1 })
	for i := 2; i <= 3; i++ {
		testfiles.Write(t, dir, map[string]string{"site/index.html": fmt.Sprintf("<h1>v%d</h1>", i)})
		waitUntil(t, fmt.Sprintf("change %d pushed", i), func() bool { return pushes() == i })
	}
	if _, err := io.WriteString(typed, "q\n"); err != nil {
		t.Fatal(err)
	}
	if code := exited(); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errOut.String())
	}
	reads, watches := 0, 0
	rec.mu.Lock()
	for _, p := range rec.paths {
		switch {
		case p == "GET /apis/devloop.dev/v1alpha1/namespaces/"+ns+"/devenvironments/"+name:
			reads++
		case p == "GET /apis/devloop.dev/v1alpha1/namespaces/"+ns+"/devenvironments":
			watches++
		}
	}
	rec.mu.Unlock()
	if reads != 1 || watches < 1 {
		t.Fatalf("three changes pushed with %d reads of the environment and %d watches, want 1 read (at the start) and a watch; requests: %v\n%s",
			reads, watches, rec.paths, out.String())
	}
}
