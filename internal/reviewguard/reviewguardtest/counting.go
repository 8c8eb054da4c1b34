// Package reviewguardtest is for tests of services that review callers'
// tokens: the review connection as cmd/manager makes it, counting what it
// sends.
package reviewguardtest

import (
	"net/http"
	"strings"
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
