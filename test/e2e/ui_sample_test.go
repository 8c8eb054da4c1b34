//go:build e2e

package e2e

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/cli"
	"github.com/devloop-dev/devloop/internal/devcluster"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/test/browser"
)

// uiSample is the sample environment on the local cluster, in a
// namespace of its own, seen through `kubectl devloop ui -n NS` in
// Debian's headless Chromium: what the dashboard's e2e cases share.
type uiSample struct {
	c    *devcluster.Cluster
	bctx context.Context
	ctx  context.Context
	g    *WithT
	ns   string
	env  *v1alpha1.DevEnvironment
	key  client.ObjectKey
	dir  string // the sample's tree, pushed as its source
	base string // http://127.0.0.1:PORT
}

// uiOnSample pushes a copy of the sample's tree and applies the sample
// (edited first by edit, when given) in a new namespace named after
// prefix, starts the dashboard on that namespace for at most timeout and
// opens its URL in the browser.
func uiOnSample(t *testing.T, prefix string, timeout time.Duration, edit func(env *v1alpha1.DevEnvironment)) *uiSample {
	t.Helper()
	u := &uiSample{c: need(t), bctx: browser.Start(t), g: NewWithT(t)}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	u.ctx = ctx
	u.ns = namespace(t, prefix)
	u.env = sampleIn(t, u.ns)
	if edit != nil {
		edit(u.env)
	}
	u.dir = copyDir(t, u.c.SampleDir())
	pushDir(t, u.env, u.dir)
	u.g.Expect(u.c.ApplyEnvironment(ctx, u.env)).To(Succeed())
	u.key = client.ObjectKeyFromObject(u.env)

	out := &lockedBuffer{}
	go func() {
		streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: out}
		cli.Run(ctx, []string{"--kubeconfig", u.c.Kubeconfig, "-n", u.ns, "ui", "--no-open"}, streams, cli.Options{})
	}()
	urlRE := regexp.MustCompile(`(http://127\.0\.0\.1:\d+)/\?code=[0-9a-f]+`)
	var m []string
	u.g.Eventually(func() []string { m = urlRE.FindStringSubmatch(out.String()); return m }, time.Minute, 50*time.Millisecond).ShouldNot(BeNil(), "the dashboard's URL")
	u.base = m[1]
	browser.Navigate(t, u.bctx, m[0])
	return u
}

// envPage is the sample's page: TAB appended opens that tab.
func (u *uiSample) envPage() string {
	return u.base + "/#/env/" + u.ns + "/" + u.env.Name + "/"
}

// watchAnnotation watches the environment from now and calls seen with
// the annotation's value on every event (first: the value it had when
// the watch began); the returned stop ends the watch and waits until
// seen is no longer called. Called at cleanup too.
func watchAnnotation(t *testing.T, key client.ObjectKey, annotation string, seen func(value string, first bool)) (stop func()) {
	t.Helper()
	wc, err := client.NewWithWatch(need(t).Config, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), &v1alpha1.DevEnvironmentList{}, client.InNamespace(key.Namespace), client.MatchingFields{"metadata.name": key.Name})
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for ev := range w.ResultChan() {
			env, ok := ev.Object.(*v1alpha1.DevEnvironment)
			if ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				seen(env.Annotations[annotation], ev.Type == watch.Added)
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { w.Stop(); <-stopped }) }
	t.Cleanup(stop)
	return stop
}

// watchTriggerWrites watches the environment from now and returns a
// function that stops watching and says how many writes set the trigger
// annotation to value (a change from any other value or none).
func watchTriggerWrites(t *testing.T, key client.ObjectKey, value string) func() int {
	t.Helper()
	var mu sync.Mutex
	writes, last := 0, ""
	stop := watchAnnotation(t, key, v1alpha1.TriggerAnnotation, func(cur string, first bool) {
		mu.Lock()
		defer mu.Unlock()
		if !first && cur == value && last != value {
			writes++
		}
		last = cur
	})
	return func() int {
		stop()
		mu.Lock()
		defer mu.Unlock()
		return writes
	}
}

// watchReconcileWrites watches the environment from now and returns a
// function that stops watching and says how many distinct reconcile
// requests were written.
func watchReconcileWrites(t *testing.T, key client.ObjectKey) func() int {
	t.Helper()
	var mu sync.Mutex
	seen, before := map[string]bool{}, ""
	stop := watchAnnotation(t, key, v1alpha1.ReconcileRequestAnnotation, func(cur string, first bool) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case first:
			before = cur // the request before the click, if any
		case cur != "" && cur != before:
			seen[cur] = true
		}
	})
	return func() int {
		stop()
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
}
