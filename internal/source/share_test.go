package source

import (
	"context"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Issue 31, item 7: the store's share is per namespace. Three
// environments of team-a cannot hold more than team-a's share between
// them, and team-b's environment is admitted all the same.
func TestStoreShareIsPerNamespace(t *testing.T) {
	f, refs, _ := boundedStore(t, 4, 100, 2.5)
	ctx := context.Background()
	serve := func(ns string, env string, i int) error {
		f.UsingIn(ns, envUID(env), refs[i])
		_, err := f.ServeIn(ctx, ns, envUID(env), refs[i], nil)
		return err
	}
	for i, env := range []string{"a1", "a2"} {
		if err := serve("team-a", env, i); err != nil {
			t.Fatalf("%s: %v", env, err)
		}
	}
	err := serve("team-a", "a3", 2)
	expectError(t, err, permanent, []string{`source "src2"`, "this namespace's share of the source store"})
	if err := serve("team-b", "b1", 3); err != nil {
		t.Fatalf("team-b was refused for what team-a holds: %v", err)
	}
}

// Issue 32, item 2: a refused source is remembered by its entry (content
// and origin) and not downloaded again while it is the same; other
// content is fetched at once.
func TestRefusedSourceIsNotFetchedAgain(t *testing.T) {
	ctx := context.Background()
	unsafe := gzipped(t, tarOf(t, tfile("/etc/cron.d/x", "evil")))
	ref, requests := artifactServer(t, unsafe)
	f := newFetcher(t)
	_, first := f.Serve(ctx, "a", ref, nil)
	expectError(t, first, permanent, []string{`source "flux"`})
	for range 3 {
		_, again := f.Serve(ctx, "a", ref, nil)
		if again == nil || again.Error() != first.Error() {
			t.Fatalf("served again: %v, want the refusal %v", again, first)
		}
	}
	if n := requests.n.Load(); n != 1 {
		t.Errorf("the refused source was downloaded %d times, want 1", n)
	}
	good, goodRequests := artifactServer(t, gzipped(t, tarOf(t, tfile("a.txt", "fine"))))
	if _, err := f.Serve(ctx, "a", good, nil); err != nil {
		t.Fatal(err)
	}
	if n := goodRequests.n.Load(); n != 1 {
		t.Errorf("new content was downloaded %d times, want 1", n)
	}

	t.Run("refused for room: fetched again once it fits", func(t *testing.T) {
		f, refs, counts := boundedStore(t, 1, 100, 0.5)
		_, err := f.Serve(ctx, "a", refs[0], nil)
		expectError(t, err, permanent, []string{"share of the source store"})
		if _, err := f.Serve(ctx, "a", refs[0], nil); err == nil {
			t.Fatal("served after a refusal for room")
		}
		if n := counts[0].n.Load(); n != 1 {
			t.Errorf("downloaded %d times while it cannot fit, want 1", n)
		}
		roomier := *f
		roomier.MaxEnvBytes = f.MaxEnvBytes * 4
		if _, err := roomier.Serve(ctx, "a", refs[0], nil); err != nil {
			t.Fatal(err)
		}
		if n := counts[0].n.Load(); n != 2 {
			t.Errorf("downloaded %d times, want 2: once it fits it is fetched", n)
		}
	})
}

// Issue 31, item 7: a source that trickles its content (a tarpit) holds
// a fetch for its deadline at most, and is then not tried again on every
// reconcile but after a backoff.
func TestTarpitSourceIsCutAtItsDeadlineAndBacksOff(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Length", "1000000")
		w.WriteHeader(http.StatusOK)
		for {
			if _, err := w.Write([]byte{0x1f}); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}))
	t.Cleanup(srv.Close)
	f := newFetcher(t)
	f.Timeout = time.Second
	ref := Ref{Source: "slow", Kind: KindArtifact, URL: srv.URL + "/a.tar.gz", Digest: "sha256:" + hexOf(1)}
	start := time.Now()
	_, err := f.Serve(context.Background(), "a", ref, nil)
	t.Logf("the tarpit held the fetch %s (deadline %s)", time.Since(start).Round(time.Millisecond), f.Timeout)
	expectError(t, err, unavailable, []string{`source "slow"`, "not fetched within its deadline of 1s", "tried again in 1m0s"})
	start = time.Now()
	_, again := f.Serve(context.Background(), "a", ref, nil)
	t.Logf("asked again: answered in %s", time.Since(start).Round(time.Millisecond))
	if again == nil || again.Error() != err.Error() {
		t.Errorf("asked again: %v, want the remembered %v", again, err)
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("the tarpit was asked %d times, want 1", n)
	}
}

// Issue 32, item 2: what a fetch in progress has written counts against
// the store's bound, so two large fetches at once cannot take more than
// the store together.
func TestFetchesInFlightCountAgainstTheStoreBound(t *testing.T) {
	const mib = 1 << 20
	big := gzipped(t, tarOf(t, tfile("big", string(randomText(3*mib/2)))))
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(big[:mib])
		w.(http.Flusher).Flush()
		<-release
		_, _ = w.Write(big[mib:])
	}))
	t.Cleanup(srv.Close)
	small, _ := artifactServer(t, gzipped(t, tarOf(t, tfile("small", string(randomText(mib*6/5))))))
	f := &Fetcher{Root: t.TempDir(), Timeout: time.Minute, MaxStoreBytes: 2 * mib, MaxEnvBytes: 2 * mib}
	ctx := context.Background()

	done := make(chan error, 1)
	go func() {
		_, err := f.Serve(ctx, "a", Ref{Source: "big", Kind: KindArtifact, URL: srv.URL + "/big.tar.gz", Digest: sha256Of(big)}, nil)
		done <- err
	}()
	st := f.state()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st.mu.Lock()
		var n int64
		for _, x := range st.inflightFills {
			n += x.bytes
		}
		st.mu.Unlock()
		if n >= mib {
			break
		}
		if time.Now().After(deadline) {
			close(release)
			t.Fatalf("the fetch in progress was never counted (%d bytes)", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, err := f.Serve(ctx, "b", small, nil)
	expectError(t, err, unavailable, []string{"the source store is full"})
	close(release)
	// The big fetch ends either way: its archive and its extracted tree
	// (1.5 MiB each, random text) are on disk together for a moment, 3 MiB
	// against the 2 MiB store, so a watch tick that lands during the
	// extraction (on a busy machine) rightly stops it, naming itself.
	if err := <-done; err != nil && !strings.Contains(err.Error(), `source "big"`) {
		t.Fatalf("the fetch in progress ended with another source's error: %v", err)
	} else if err != nil {
		t.Logf("the fetch in progress was stopped by the store's bound: %v", err)
	}
}

func envUID(s string) types.UID { return types.UID(s) }

// randomText is n bytes that gzip cannot shrink much.
func randomText(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewSource(int64(n)))
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/"
	for i := range b {
		b[i] = letters[r.Intn(len(letters))]
	}
	return b
}

func hexOf(b byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 64)
	for i := range out {
		out[i] = digits[int(b)%16]
	}
	return string(out)
}

// A refusal remembered for one source is told to another environment
// naming the same content in its own source's name.
func TestRememberedRefusalNamesTheAskingSource(t *testing.T) {
	ctx := context.Background()
	ref, requests := artifactServer(t, gzipped(t, tarOf(t, tfile("/etc/cron.d/x", "evil"))))
	f := newFetcher(t)
	_, err := f.Serve(ctx, "a", ref, nil)
	expectError(t, err, permanent, []string{`source "flux"`, "unsafe content"})
	other := ref
	other.Source = "mine"
	_, err = f.Serve(ctx, "b", other, nil)
	expectError(t, err, permanent, []string{`source "mine"`, "unsafe content"})
	if strings.Contains(err.Error(), `"flux"`) {
		t.Errorf("the refusal names another environment's source: %v", err)
	}
	if n := requests.n.Load(); n != 1 {
		t.Errorf("downloaded %d times, want 1", n)
	}
}
