// Package reviewguardtest is for tests of services that review callers'
// tokens: the review connection as cmd/manager makes it, counting what it
// sends, and the checks every such service passes.
package reviewguardtest

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/devloop-dev/devloop/internal/reviewguard"
)

// CountingReviews is cfg's identity through the review client's bound
// (reviewguard.ReviewConfig), and the number of TokenReviews sent through it.
func CountingReviews(t testing.TB, cfg *rest.Config) (kubernetes.Interface, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	review := reviewguard.ReviewConfig(cfg)
	review.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/tokenreviews") {
				n.Add(1)
			}
			return rt.RoundTrip(r)
		})
	})
	cs, err := kubernetes.NewForConfig(review)
	if err != nil {
		t.Fatal(err)
	}
	return cs, &n
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Answer is what a service answered one request: its status code, the
// Retry-After header, or the error that stopped it.
type Answer struct {
	Code       int
	RetryAfter string
	Err        error
}

// ExpectRefusalsRemembered sends n requests with one bad token through
// ask: each is refused (401) and together they cost at most two
// TokenReviews (reviews, from CountingReviews).
func ExpectRefusalsRemembered(t testing.TB, ask func(token string) Answer, reviews *atomic.Int64) {
	t.Helper()
	const n = 200
	for i := 0; i < n; i++ {
		if got := ask("not-a-kubernetes-token"); got.Err != nil || got.Code != http.StatusUnauthorized {
			t.Fatalf("request %d with a bad token: %d %v, want 401", i, got.Code, got.Err)
		}
	}
	if got := reviews.Load(); got > 2 {
		t.Errorf("%d requests with one bad token cost %d TokenReviews, want at most 2", n, got)
	}
}

// ExpectSourceLimited has one source try ever new bad tokens through ask,
// many at once (so the answer does not depend on how fast the API server
// reviews): some are answered 429 with a Retry-After (wantRetryAfter) and
// every other answer is 401. It returns how many were answered 429.
func ExpectSourceLimited(t testing.TB, ask func(token string) Answer, wantRetryAfter bool) int64 {
	t.Helper()
	var limited, other atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 2*reviewguard.SourceBurst; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20 && limited.Load() < 10; i++ {
				got := ask(fmt.Sprintf("garbage-%d-%d", w, i))
				switch {
				case got.Err != nil:
					other.Add(1)
					return
				case got.Code == http.StatusTooManyRequests:
					limited.Add(1)
					if wantRetryAfter && got.RetryAfter == "" {
						other.Add(1)
					}
				case got.Code != http.StatusUnauthorized:
					other.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if limited.Load() == 0 || other.Load() != 0 {
		t.Fatalf("requests with new bad tokens from one source: %d answered 429, %d neither 401 nor 429 (with Retry-After: %v)", limited.Load(), other.Load(), wantRetryAfter)
	}
	return limited.Load()
}
