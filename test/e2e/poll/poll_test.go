package poll

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// versionServer serves "version N" where N counts up every step of the clock,
// as a server whose new code lands while it is polled.
func versionServer(t *testing.T, step time.Duration) *httptest.Server {
	start := time.Now()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "version %d\n", time.Since(start)/step)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestUntilReturnsWhenTheAnswerArrivesMeasuredFromSince(t *testing.T) {
	g := NewWithT(t)
	// since is half a second before the server starts: measured from it,
	// version 2 (200 ms after the start) takes at least 700 ms; measured
	// from the first probe it would take about 200. (since was taken
	// after the server's start, and a busy machine saw 193 ms.)
	since := time.Now().Add(-500 * time.Millisecond)
	srv := versionServer(t, 100*time.Millisecond)
	client := NewHTTPClient(time.Second)
	var last string
	took, err := Wait{What: "version 2", Every: 10 * time.Millisecond, Within: 2 * time.Second, Since: since}.Until(context.Background(),
		Answer(func(ctx context.Context) string { return Get(ctx, client, srv.URL) },
			func(a string) bool { return strings.Contains(a, "version 2") }, &last))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(last).To(Equal("version 2\n"))
	// Measured from since, not from the first probe (no upper bound but
	// Within: how soon it returns depends on the machine's load).
	g.Expect(took).To(BeNumerically(">=", 700*time.Millisecond))
}

func TestUntilSaysWhatItSawLastWhenTheDeadlinePasses(t *testing.T) {
	g := NewWithT(t)
	srv := versionServer(t, time.Hour)
	client := NewHTTPClient(time.Second)
	start := time.Now()
	_, err := Wait{What: "version 1 serving", Every: 20 * time.Millisecond, Within: 150 * time.Millisecond}.Until(context.Background(),
		Answer(func(ctx context.Context) string { return Get(ctx, client, srv.URL) },
			func(a string) bool { return a == "version 1\n" }, nil))
	elapsed := time.Since(start)
	var timeout *TimeoutError
	g.Expect(errors.As(err, &timeout)).To(BeTrue())
	g.Expect(err.Error()).To(HavePrefix("version 1 serving: not within 150ms ("))
	g.Expect(err.Error()).To(HaveSuffix(`probes); last seen: "version 0\n"`))
	// A probe now, one every 20 ms, a last one at the deadline (fewer on a
	// loaded machine, never more), and no wait past the deadline but the
	// last request's.
	g.Expect(timeout.Probes).To(BeNumerically(">=", 3))
	g.Expect(timeout.Probes).To(BeNumerically("<=", 9))
	g.Expect(elapsed).To(BeNumerically(">=", 150*time.Millisecond))
	g.Expect(elapsed).To(BeNumerically("<", 650*time.Millisecond))
}

func TestUntilProbesAtTheInterval(t *testing.T) {
	g := NewWithT(t)
	var probes atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		probes.Add(1)
		fmt.Fprint(w, "not yet")
	}))
	defer srv.Close()
	client := NewHTTPClient(time.Second)
	_, err := Wait{What: "never", Every: 50 * time.Millisecond, Within: 500 * time.Millisecond}.Until(context.Background(),
		Answer(func(ctx context.Context) string { return Get(ctx, client, srv.URL) }, func(string) bool { return false }, nil))
	g.Expect(err).To(HaveOccurred())
	// 500 ms at one probe every 50 ms (plus the request each time): about
	// ten, never a busy loop, never a single look.
	g.Expect(probes.Load()).To(BeNumerically(">=", 3))
	g.Expect(probes.Load()).To(BeNumerically("<=", 12))
}

func TestUntilEndsAtOnceOnAProbeError(t *testing.T) {
	g := NewWithT(t)
	calls := 0
	start := time.Now()
	_, err := Wait{What: "Ready", Every: time.Second, Within: time.Minute}.Until(context.Background(), func(context.Context) (string, bool, error) {
		calls++
		return "Stalled=True (BuildFailed)", false, errors.New("stalled: exit code 1")
	})
	g.Expect(calls).To(Equal(1))
	g.Expect(time.Since(start)).To(BeNumerically("<", 500*time.Millisecond), "no wait for the next interval")
	g.Expect(err).To(MatchError("Ready: ended after 1 probes: stalled: exit code 1; last seen: Stalled=True (BuildFailed)"))
}

func TestUntilEndsWithTheContext(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := Wait{What: "x", Every: 10 * time.Millisecond, Within: time.Minute}.Until(ctx, func(context.Context) (string, bool, error) {
		return "y", false, nil
	})
	g.Expect(errors.Is(err, context.DeadlineExceeded)).To(BeTrue())
	g.Expect(err.Error()).To(HaveSuffix("last seen: y"))
}

func TestGetSaysWhyThereIsNoAnswer(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	NewWithT(t).Expect(Get(context.Background(), NewHTTPClient(time.Second), url)).To(HavePrefix("error: "))
}

func TestAssertionsReportTheFirstFailure(t *testing.T) {
	g := NewWithT(t)
	var after bool
	var ready *struct{ Status string }
	failure, ok := Assertions(func(g Gomega) {
		g.Expect(ready).NotTo(BeNil(), "Ready condition")
		after = true
		g.Expect(ready.Status).To(Equal("True")) // would panic on nil: never reached
	})
	g.Expect(ok).To(BeFalse())
	g.Expect(after).To(BeFalse(), "a failed assertion stops the check, as in Eventually")
	g.Expect(failure).To(HavePrefix("Ready condition Expected"))
	g.Expect(failure).NotTo(ContainSubstring("\n"))

	failure, ok = Assertions(func(g Gomega) { g.Expect(1).To(Equal(1)) })
	g.Expect(ok).To(BeTrue())
	g.Expect(failure).To(BeEmpty())
}

func TestAssertionsLetOtherPanicsThrough(t *testing.T) {
	NewWithT(t).Expect(func() { Assertions(func(Gomega) { panic("boom") }) }).To(PanicWith("boom"))
}

func TestCheckIsAProbe(t *testing.T) {
	g := NewWithT(t)
	n := 0
	took, err := Wait{What: "three", Every: time.Millisecond, Within: time.Second}.Until(context.Background(), Check(func(g Gomega) {
		n++
		g.Expect(n).To(Equal(3))
	}))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(3))
	g.Expect(took).To(BeNumerically("<", time.Second))
}

func TestSucceedsRetriesAnAttempt(t *testing.T) {
	g := NewWithT(t)
	n := 0
	_, err := Wait{What: "patched", Every: time.Millisecond, Within: time.Second}.Until(context.Background(), Succeeds(func(context.Context) error {
		if n++; n < 3 {
			return errors.New("the object has been modified")
		}
		return nil
	}))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(3))
	_, err = Wait{What: "patched", Every: time.Millisecond, Within: 5 * time.Millisecond}.Until(context.Background(), Succeeds(func(context.Context) error {
		return errors.New("forbidden")
	}))
	g.Expect(err).To(MatchError(HaveSuffix("last seen: forbidden")))
}
