package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

// blobGate serves a registry whose GETs of the gated blobs each wait, up
// to a bound, for another to be in flight beside them: it records how many
// were at once. Fetched one after the other, every GET waits the whole
// bound.
type blobGate struct {
	h     http.Handler
	bound time.Duration
	gated []string
	// broken, when set, is answered for a blob GET whose path holds it.
	broken func(w http.ResponseWriter, r *http.Request) bool

	mu       sync.Mutex
	cond     *sync.Cond
	inFlight int
	most     int
}

func newBlobGate(bound time.Duration) *blobGate {
	g := &blobGate{h: registry.New(), bound: bound}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// gatedArtifact serves layers as an artifact at repo:dev behind a new
// blobGate with bound.
func gatedArtifact(t *testing.T, bound time.Duration, repo string, layers [][]byte) (*blobGate, Ref) {
	t.Helper()
	gate := newBlobGate(bound)
	srv := httptest.NewServer(gate)
	t.Cleanup(srv.Close)
	host := hostOf(srv)
	d := pushArtifact(t, host, repo, layers, "dev")
	return gate, Ref{Source: "local", Kind: KindOCI, URL: host + "/" + repo, Digest: d, Insecure: true}
}

func (g *blobGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || !strings.Contains(r.URL.Path, "/blobs/") || !slices.ContainsFunc(g.gated, func(d string) bool { return strings.HasSuffix(r.URL.Path, d) }) {
		g.h.ServeHTTP(w, r)
		return
	}
	g.mu.Lock()
	g.inFlight++
	g.most = max(g.most, g.inFlight)
	g.cond.Broadcast()
	deadline := time.Now().Add(g.bound)
	for g.inFlight < 2 && time.Now().Before(deadline) {
		// Woken by the next GET, or by the timer below.
		t := time.AfterFunc(time.Until(deadline), g.cond.Broadcast)
		g.cond.Wait()
		t.Stop()
	}
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inFlight--
		g.mu.Unlock()
	}()
	if g.broken != nil && g.broken(w, r) {
		return
	}
	g.h.ServeHTTP(w, r)
}

func (g *blobGate) mostAtOnce() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.most
}

// An artifact's layers are downloaded side by side, not one after the
// other as each is extracted: with a registry whose blob GETs wait for
// company, the three layers' GETs are in flight together, and the tree is
// the layers applied in order (a later layer's file and whiteout win).
func TestAnArtifactsLayersAreDownloadedSideBySide(t *testing.T) {
	layers := [][]byte{
		tarOf(t, tfile("a.txt", "layer 0"), tfile("gone.txt", "x")),
		gzipped(t, tarOf(t, tfile("a.txt", "layer 1"), tfile("b.txt", "b"))),
		tarOf(t, tfile(".wh.gone.txt", ""), tfile("c.txt", "c")),
	}
	gate, ref := gatedArtifact(t, time.Second, "team-a/src/chunks", layers)
	for _, l := range layers {
		gate.gated = append(gate.gated, digestOfBytes(l))
	}

	a, err := newFetcher(t).Fetch(context.Background(), ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := gate.mostAtOnce(); n < 2 {
		t.Errorf("at most %d blob GET in flight at once: the layers were downloaded one after the other", n)
	}
	for file, want := range map[string]string{"a.txt": "layer 1", "b.txt": "b", "c.txt": "c"} {
		if got := readFile(t, filepath.Join(a.Dir, file)); got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(a.Dir, "gone.txt")); err == nil {
		t.Errorf("gone.txt survived the later layer's whiteout")
	}
}

// A later layer the registry fails or corrupts is that layer's error, in
// the registry's words, as when layers were downloaded one by one: a 503
// is a wait (unavailable), a blob that does not match its digest is
// refused; and an unsafe first layer is refused before the others' downloads
// are awaited.
func TestALaterLayersFailureIsItsOwn(t *testing.T) {
	layers := [][]byte{
		tarOf(t, tfile("a.txt", "layer 0")),
		tarOf(t, tfile("b.txt", "layer 1")),
		tarOf(t, tfile("c.txt", "layer 2")),
	}
	for _, tc := range []struct {
		name   string
		answer func(w http.ResponseWriter)
		class  errorClass
		want   []string
	}{
		{"registry down", func(w http.ResponseWriter) { http.Error(w, "down", http.StatusServiceUnavailable) }, unavailable, []string{"layer 2", "503"}},
		{"corrupted", func(w http.ResponseWriter) { _, _ = w.Write(tarOf(t, tfile("c.txt", "LAYER 2"))) }, permanent, []string{"layer 2", "does not match its digest"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gate, ref := gatedArtifact(t, 0, "team-a/src/chunks", layers)
			third := digestOfBytes(layers[2])
			gate.gated = []string{third}
			gate.broken = func(w http.ResponseWriter, r *http.Request) bool {
				if !strings.HasSuffix(r.URL.Path, third) {
					return false
				}
				tc.answer(w)
				return true
			}
			_, err := newFetcher(t).Fetch(context.Background(), ref, nil)
			expectError(t, err, tc.class, tc.want)
		})
	}
	t.Run("unsafe first layer", func(t *testing.T) {
		evil := append([][]byte{tarOf(t, tfile("../../x", "evil"))}, layers[1:]...)
		_, ref := gatedArtifact(t, 0, "team-a/src/evil", evil)
		_, err := newFetcher(t).Fetch(context.Background(), ref, nil)
		expectError(t, err, permanent, []string{"layer 0", "points outside"})
	})
}

// digestOfBytes is the hex sha256 of b, as a blob's path ends.
func digestOfBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// A refused layer ends the fetch at once, even while a later layer's
// download waits on a registry that stopped sending it half way: the
// download is closed, not waited for until the fetch's deadline.
func TestARefusedLayerDoesNotWaitForAStalledDownload(t *testing.T) {
	layers := [][]byte{
		tarOf(t, tfile("../../x", "evil")),
		tarOf(t, tfile("b.txt", strings.Repeat("b", 64<<10))),
	}
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	gate, ref := gatedArtifact(t, 0, "team-a/src/stall", layers)
	stalled := digestOfBytes(layers[1])
	gate.gated = []string{stalled}
	gate.broken = func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.HasSuffix(r.URL.Path, stalled) {
			return false
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(layers[1])))
		_, _ = w.Write(layers[1][:1024])
		w.(http.Flusher).Flush()
		select { // the rest never comes while the fetch runs
		case <-release:
		case <-r.Context().Done():
		}
		return true
	}
	f := newFetcher(t)
	f.Timeout = 30 * time.Second
	start := time.Now()
	_, err := f.Fetch(context.Background(), ref, nil)
	expectError(t, err, permanent, []string{"layer 0", "points outside"})
	if took := time.Since(start); took > f.Timeout/2 {
		t.Errorf("the refusal took %s: it waited for the stalled download", took)
	}
}
