package registryauth

import (
	"net/http"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/kubernetes"

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
	reviewguardtest.ExpectRefusalsRemembered(t, func(token string) reviewguardtest.Answer {
		return reviewguardtest.Answer{Code: askPull(t, srv, a.ns, token)}
	}, reviews)
	if got := askPull(t, srv, a.ns, a.builderRegistryToken); got != http.StatusOK {
		t.Errorf("the team's token after the flood: %d, want 200", got)
	}
}

// A source trying ever new tokens is answered 429, with a Retry-After,
// once it passed its share of reviews, before any review.
func TestTokenServiceLimitsReviewsPerSource(t *testing.T) {
	cs, reviews := countingReviews(t)
	srv := newTokenServer(t, cs)
	limited := reviewguardtest.ExpectSourceLimited(t, func(token string) reviewguardtest.Answer {
		r, _ := http.NewRequest(http.MethodGet, srv.URL+"?service="+DefaultService, nil)
		r.SetBasicAuth("k8s", token)
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			return reviewguardtest.Answer{Err: err}
		}
		resp.Body.Close()
		return reviewguardtest.Answer{Code: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After")}
	}, true)
	t.Logf("%d TokenReviews sent, %d requests answered 429", reviews.Load(), limited)
}
