package source

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/timeline"
)

// The change timeline's Fetch covers the download of a pushed artifact,
// which happens when the first build reads the content, after the sources
// step resolved (and recorded) the new digest: before, an OCI source's
// download was in no step, so `kubectl devloop push` showed it as time
// unaccounted for before the assembly. Served again from the store, the
// content adds nothing to Fetch.
func TestTheChangesFetchCoversTheDownload(t *testing.T) {
	reg := newOCIRegistry(t, tarOf(t, tfile("a.txt", "a")), tarOf(t, tfile("b.txt", "b")))
	env := &v1alpha1.DevEnvironment{}
	env.Name, env.Namespace, env.UID = "app", testNamespace, "uid-fetch-timeline"
	env.Spec.Sources = []v1alpha1.Source{ociSource(reg.repo, "dev", "", true)}
	rec := timeline.NewRecorder()
	ctx := timeline.WithEnv(context.Background(), rec, env.UID)
	rec.Begin(env.UID, "local", "pushed", time.Now(), nil)
	r := &Resolver{Fetcher: newFetcher(t)}

	s := r.Begin(env, nil)
	if _, err := s.Resolve(ctx); err != nil {
		t.Fatal(err)
	}
	if st := env.Status.Source("local"); st == nil || st.Digest != reg.digest {
		t.Fatalf("the sources step left status %+v, want digest %s", env.Status.Sources, reg.digest)
	}
	before := time.Now()
	if _, err := s.Artifact(ctx, "local"); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	fetch := fetchStep(t, rec, env)
	if fetch == nil {
		t.Fatalf("no Fetch step for the download: %+v", rec.Changes(env.UID)[0].Steps)
	}
	if end := fetch.Start.Add(fetch.Duration); fetch.Start.Before(before) || end.After(after) || end.Before(fetch.Start) {
		t.Errorf("Fetch %s–%s is not the download (%s–%s)", fetch.Start, end, before, after)
	}

	// The next reconcile serves the same content from the store.
	again := r.Begin(env, nil)
	if _, err := again.Resolve(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := again.Artifact(ctx, "local"); err != nil {
		t.Fatal(err)
	}
	if got := fetchStep(t, rec, env); *got != *fetch {
		t.Errorf("content served from the store moved Fetch: %+v, was %+v", got, fetch)
	}
}

func fetchStep(t *testing.T, rec *timeline.Recorder, env *v1alpha1.DevEnvironment) *timeline.Step {
	t.Helper()
	changes := rec.Changes(env.UID)
	if len(changes) == 0 {
		t.Fatal("no change recorded")
	}
	i := slices.IndexFunc(changes[0].Steps, func(s timeline.Step) bool { return s.Name == timeline.Fetch })
	if i < 0 {
		return nil
	}
	return &changes[0].Steps[i]
}
