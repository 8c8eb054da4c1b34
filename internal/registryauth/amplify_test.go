package registryauth

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/devloop-dev/devloop/internal/reviewguard"
	"github.com/devloop-dev/devloop/internal/reviewguard/reviewguardtest"
)

// countingReviews is the operator's connection (the chart's ClusterRole)
// as cmd/manager makes it for reviews, counting the TokenReviews it sends.
func countingReviews(t *testing.T) (kubernetes.Interface, *atomic.Int64) {
	t.Helper()
	return reviewguardtest.CountingReviews(t, operatorCfg)
}

// One anonymous client repeating one bad token costs the API server a
// review or two, not one per request (the flood: 1,306 requests,
// 2,797 TokenReviews); a team's good token is still reviewed and granted
// meanwhile.
func TestTokenServiceRemembersRefusals(t *testing.T) {
	a := newTenant(t, "refusals-")
	cs, reviews := countingReviews(t)
	srv := newTokenServer(t, cs)
	ask := func(token string) int { return askPull(t, srv, a.ns, token) }
	const n = 200
	for i := 0; i < n; i++ {
		if got := ask("not-a-kubernetes-token"); got != http.StatusUnauthorized {
			t.Fatalf("request %d with a bad token: %d, want 401", i, got)
		}
	}
	if got := reviews.Load(); got > 2 {
		t.Errorf("%d requests with one bad token cost %d TokenReviews, want at most 2", n, got)
	}
	if got := ask(a.builderRegistryToken); got != http.StatusOK {
		t.Errorf("the team's token after the flood: %d, want 200", got)
	}
}

// A source trying ever new tokens is answered 429 once it passed its
// share of reviews, before any review. Many at once, so the answer does
// not depend on how fast the API server reviews.
func TestTokenServiceLimitsReviewsPerSource(t *testing.T) {
	cs, reviews := countingReviews(t)
	srv := newTokenServer(t, cs)
	var limited, other atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 2*reviewguard.SourceBurst; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20 && limited.Load() < 10; i++ {
				r, _ := http.NewRequest(http.MethodGet, srv.URL+"?service="+DefaultService, nil)
				r.SetBasicAuth("k8s", fmt.Sprintf("garbage-%d-%d", w, i))
				resp, err := http.DefaultClient.Do(r)
				if err != nil {
					other.Add(1)
					return
				}
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusTooManyRequests:
					limited.Add(1)
					if resp.Header.Get("Retry-After") == "" {
						other.Add(1)
					}
				case http.StatusUnauthorized:
				default:
					other.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if limited.Load() == 0 || other.Load() != 0 {
		t.Fatalf("requests with new bad tokens from one source: %d answered 429, %d neither 401 nor 429 with Retry-After", limited.Load(), other.Load())
	}
	t.Logf("%d TokenReviews sent, %d requests answered 429", reviews.Load(), limited.Load())
}
