package cli

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/internal/testfiles"
	"github.com/devloop-dev/devloop/internal/testregistry"
	"github.com/devloop-dev/devloop/test/browser"
)

// Rebuild from the page against the real operator and the real
// registry: with nothing changed since the last build, the reconcile it
// requests builds and pushes nothing and the page says so; after new
// content is pushed (no reconcile asked, the source not polled), the
// image's own Rebuild builds it and the page names the new digest.
func TestUIRebuildOfUnchangedInputsBuildsNothingAndSaysSo(t *testing.T) {
	bctx := browser.Start(t)
	host := testregistry.Start(t)
	ns := operatorNamespace(t)
	name := uniqueName("rebuilt")
	spec := pushedSpec(host, name+"-src")
	spec.Sources[0].Interval = &metav1.Duration{Duration: time.Hour}
	createEnv(t, ns, name, spec)
	dir := appTreeFor(t, "<h1>v1</h1>", name)
	if r := plugin(t, "push", dir, "--env", name, "--source", "app", "-n", ns); r.code != 0 {
		t.Fatalf("push:\n%s", r)
	}
	imageName := name + "-src-web"
	before := getEnv(t, ns, name).Status.Component("web").Image(imageName).DeepCopy()

	base, url := launchDashboardFor(t, 5*time.Minute, testOptions(), "-n", ns)
	browser.Navigate(t, bctx, url)
	browser.WaitJS(t, bctx, "the list", `document.querySelector('tr[data-env]')`)
	browser.Navigate(t, bctx, base+"/#/env/"+ns+"/"+name+"/graph")
	result := `document.querySelector('#resources [data-rebuild-result="web"]').textContent.trim()`
	browser.Click(t, bctx, `#resources [data-rebuild="web"]`)
	// The operator's reconcile, on a busy machine, may take longer than
	// a page update.
	browser.WaitJSWithin(t, bctx, "the page saying nothing changed", result+`.startsWith('nothing changed since the last build')`, 2*time.Minute)
	env := getEnv(t, ns, name)
	if asked := env.Annotations[v1alpha1.ReconcileRequestAnnotation]; env.Status.LastHandledReconcileAt != asked {
		t.Fatalf("the page answered before the operator handled the request (%q, handled %q)", asked, env.Status.LastHandledReconcileAt)
	}
	if after := env.Status.Component("web").Image(imageName); !reflect.DeepEqual(after, before) {
		t.Errorf("a rebuild of unchanged inputs changed the image's status:\nbefore %+v\nafter  %+v", before, after)
	}

	// New content, pushed without a reconcile request: the image's own
	// Rebuild on web's card builds it, and names the new digest.
	testfiles.Write(t, dir, map[string]string{"site/index.html": "<h1>v2</h1>"})
	pushArtifactOnly(t, getEnv(t, ns, name), dir)
	browser.Navigate(t, bctx, base+"/#/env/"+ns+"/"+name+"/components")
	target := "web/" + imageName
	result = `document.querySelector('[data-component="web"] [data-rebuild-result="` + target + `"]').textContent.trim()`
	browser.WaitJS(t, bctx, "the image's Rebuild on web's card", `document.querySelector('[data-component="web"] [data-rebuild="`+target+`"]')`)
	browser.Click(t, bctx, `[data-component="web"] [data-rebuild="`+target+`"]`)
	browser.WaitJSWithin(t, bctx, "the page naming the new build", result+`.startsWith('built ')`, 2*time.Minute)
	built := getEnv(t, ns, name).Status.Component("web").Image(imageName)
	if built.Digest == before.Digest {
		t.Fatalf("the page says built, the image's digest is still %s", built.Digest)
	}
	if got, want := browser.EvalString(t, bctx, result), "built "+imageName+"@"+strings.TrimPrefix(built.Digest, "sha256:")[:12]; got != want {
		t.Errorf("the page says %q, want %q", got, want)
	}

	// The operator's own record: the new digest's push, and no second
	// push of the first one (the events of one reconcile are sent in
	// order, so a push of the old digest would be there by now).
	waitUntil(t, "the new digest's ImagePushed event", func() bool { return pushEvents(t, ns, name, built.Digest) > 0 })
	if n := pushEvents(t, ns, name, before.Digest); n != 1 {
		t.Errorf("%d pushes of the first digest recorded, want the one of the first push", n)
	}
}

// pushArtifactOnly pushes dir as the environment's first source, as
// `kubectl devloop push` does, without asking for a reconcile.
func pushArtifactOnly(t *testing.T, env *v1alpha1.DevEnvironment, dir string) {
	t.Helper()
	src := env.Spec.Sources[0]
	img, err := PackSource(dir, env, src.Name, source.CompressionNone)
	if err != nil {
		t.Fatal(err)
	}
	if err := source.PushArtifact(context.Background(), img, src.OCI.Repository+":"+src.OCI.Tag, source.PushOptions{Insecure: src.OCI.Insecure}); err != nil {
		t.Fatal(err)
	}
}

// pushEvents counts the operator's ImagePushed events of env naming
// digest (a repeated event counts each time the series says).
func pushEvents(t *testing.T, ns, env, digest string) int {
	t.Helper()
	events := &eventsv1.EventList{}
	if err := k8s.List(context.Background(), events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events.Items {
		if e.Reason != "ImagePushed" || e.Regarding.Name != env || !strings.Contains(e.Note, digest) {
			continue
		}
		n++
		if e.Series != nil {
			n += int(e.Series.Count) - 1
		}
	}
	return n
}
