package operatortest

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"testing"

	"github.com/devloop-dev/devloop/internal/source"
)

// RecordingRegistry is go-containerregistry's in-memory registry behind a
// counting, fault-injecting handler: tests read how many blobs were
// uploaded and make it answer 503 or 403.
type RecordingRegistry struct {
	*httptest.Server
	// Host is the registry's host:port, the prefix of its repositories.
	Host string

	mu      sync.Mutex
	uploads int // blob upload sessions started (POST .../blobs/uploads/)
	writes  int // every write: blob uploads, manifest and tag PUTs
	// blobReads counts the GETs of each blob by digest, in any
	// repository: what was read back of a pushed image.
	blobReads map[string]int
	// tagPuts counts the manifest PUTs by tag, per "repository:tag":
	// how many times a tag was (re)pointed.
	tagPuts map[string]int
	fault   func(r *http.Request) int
}

func newRecordingRegistry() *RecordingRegistry {
	tr := &RecordingRegistry{blobReads: map[string]int{}, tagPuts: map[string]int{}}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	tr.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tr.mu.Lock()
		fault := tr.fault
		tr.mu.Unlock()
		if fault != nil {
			if code := fault(r); code != 0 {
				w.WriteHeader(code)
				return
			}
		}
		tr.mu.Lock()
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/blobs/uploads/") {
			tr.uploads++
		}
		if r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch {
			tr.writes++
		}
		if _, digest, ok := strings.Cut(r.URL.Path, "/blobs/"); ok && r.Method == http.MethodGet && strings.HasPrefix(digest, "sha256:") {
			tr.blobReads[digest]++
		}
		if repo, ref, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v2/"), "/manifests/"); ok && r.Method == http.MethodPut && !strings.HasPrefix(ref, "sha256:") {
			tr.tagPuts[repo+":"+ref]++
		}
		tr.mu.Unlock()
		inner.ServeHTTP(w, r)
	}))
	tr.Host = strings.TrimPrefix(tr.URL, "http://")
	return tr
}

// Counts returns blob uploads and all writes so far.
func (tr *RecordingRegistry) Counts() (uploads, writes int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.uploads, tr.writes
}

// BlobReads is how many times the blob digest was read (GET), in any
// repository, so far.
func (tr *RecordingRegistry) BlobReads(digest string) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.blobReads[digest]
}

// TagPuts is how many times repo:tag was pushed (a manifest PUT by tag)
// so far.
func (tr *RecordingRegistry) TagPuts(repo, tag string) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.tagPuts[repo+":"+tag]
}

// SetFault makes the registry answer with the status f returns (0 passes).
func (tr *RecordingRegistry) SetFault(f func(r *http.Request) int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.fault = f
}

// PushSource pushes files as a one-layer OCI artifact to repo:tag, as
// `kubectl devloop push` would, and returns its digest.
func (tr *RecordingRegistry) PushSource(t testing.TB, repo, tag string, files map[string]string) v1.Hash {
	t.Helper()
	d, err := tr.Push(repo, tag, files)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Push pushes files as a one-layer OCI artifact to repo:tag.
func (tr *RecordingRegistry) Push(repo, tag string, files map[string]string) (v1.Hash, error) {
	dir, err := os.MkdirTemp("", "devloop-source-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer os.RemoveAll(dir)
	for path, content := range files {
		full := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return v1.Hash{}, err
		}
		if err := os.WriteFile(full, []byte(content), 0o755); err != nil {
			return v1.Hash{}, err
		}
	}
	return source.PushDir(context.Background(), dir, fmt.Sprintf("%s/%s:%s", tr.Host, repo, tag), true)
}

// TagDigest returns the digest a tag names in the registry.
func (tr *RecordingRegistry) TagDigest(t testing.TB, repo, tag string) string {
	t.Helper()
	ref, err := name.ParseReference(fmt.Sprintf("%s/%s:%s", tr.Host, repo, tag), name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Head(ref)
	if err != nil {
		t.Fatalf("%s: %v", ref, err)
	}
	return desc.Digest.String()
}
