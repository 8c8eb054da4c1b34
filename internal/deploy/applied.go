package deploy

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/devloop-dev/devloop/internal/deploy/helm"
)

// A no-op reconcile of an unchanged component should cost the reads
// readiness needs and nothing else. Looking for drift the thorough way
// (a GET and a server-side dry-run apply per object) and applying again
// cost four requests per object on every reconcile. So, as Flux compares
// with what it last applied, the engine remembers per component what it
// applied (the digest of the rendered objects or of the release) and the
// resourceVersion at which each object was last found exactly as wanted
// (no drift by the dry run): while the digest is the same and every
// object is still at that version, nothing can have drifted, and the
// readiness reads, which return the versions anyway, are all it takes.
// Any change — a hand edit, a controller writing status, a deletion —
// moves the version, and the thorough check runs for that reconcile.
//
// The book is memory: a restarted operator checks and applies everything
// once, as it always did, and remembers from then on.

// appliedRecord is what the engine last did to one component.
type appliedRecord struct {
	// digest is what was applied: manifestsDigest of the objects, or
	// releaseDigest of the chart, values and render key.
	digest string
	// inSync holds each object's resourceVersion at which it was last
	// found as wanted; empty until the first check after an apply.
	inSync Versions

	// Of a release: the storage Secret of the deployed revision and its
	// resourceVersion (any Helm action on the release rewrites or deletes
	// it), the revision's objects and when it was deployed.
	release *releaseRecord
}

type releaseRecord struct {
	info          helm.ReleaseInfo
	secret        string
	secretVersion string
	objects       []*unstructured.Unstructured
	deployed      time.Time
}

// appliedBook is an engine's memory of applied components, keyed by
// environment UID and component name. It is the engine's, not the
// process's: a second engine in the process (another operator.New) has
// made no record and checks everything once, as a restarted one does.
type appliedBook struct {
	mu sync.Mutex
	m  map[string]appliedRecord
}

// book is e's appliedBook, made on first use so a zero Engine works.
func (e *Engine) book() *appliedBook {
	e.appliedOnce.Do(func() { e.applied = &appliedBook{m: map[string]appliedRecord{}} })
	return e.applied
}

func appliedKey(envUID, component string) string { return envUID + "/" + component }

func (b *appliedBook) get(key string) (appliedRecord, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.m[key]
	return r, ok
}

func (b *appliedBook) set(key string, r appliedRecord) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.m[key] = r
}

func (b *appliedBook) forget(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.m, key)
}

// unchangedSince says every object of refs was read at the version it was
// last found in sync at.
func unchangedSince(inSync, read Versions, refs []ObjRef) bool {
	if len(inSync) == 0 || len(refs) == 0 {
		return false
	}
	for _, ref := range refs {
		v, ok := inSync[ref]
		if !ok || v == "" || read[ref] != v {
			return false
		}
	}
	return true
}
