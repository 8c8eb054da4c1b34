package poll

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"time"
)

// NewHTTPClient asks on a new connection each time: every answer then
// comes from an endpoint the Service (or the forward) has now, as a
// browser's next page load after a rollout would.
func NewHTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
}

// maxAnswer bounds what an answer keeps: the servers under test answer a
// line.
const maxAnswer = 1 << 10

// Get is one GET of url: its body, or "error: " and why.
func Get(ctx context.Context, client *http.Client, url string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "error: " + err.Error()
	}
	resp, err := client.Do(req)
	if err != nil {
		return "error: " + err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return "error: " + err.Error()
	}
	return string(b)
}

// Answer is a probe of an answer: ask gets it (Get, or a request through
// the API server's proxy), want says whether it is the one waited for.
// The answer is also what was seen; *got, when not nil, keeps the last.
func Answer(ask func(ctx context.Context) string, want func(answer string) bool, got *string) Probe {
	return func(ctx context.Context) (string, bool, error) {
		a := ask(ctx)
		if got != nil {
			*got = a
		}
		return quote(a), want(a), nil
	}
}

func quote(s string) string {
	const max = 200
	if len(s) > max {
		s = s[:max] + "…"
	}
	return strconv.Quote(s)
}
