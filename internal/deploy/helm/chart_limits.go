package helm

import (
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
)

// cappedTransport fails every response whose body is larger than max
// bytes while it is read, not after: Helm's registry client reads a
// chart's layers whole into memory before devloop sees them, so the size
// cap has to sit under it. A Content-Length over max fails before the
// body is read at all. exceeded records that the cap tripped, whatever
// the client above made of the error.
type cappedTransport struct {
	base     http.RoundTripper
	max      int64
	exceeded atomic.Bool
}

// errBodyTooLarge is the read error of a body over the cap.
type errBodyTooLarge struct {
	url string
	max int64
}

func (e *errBodyTooLarge) Error() string {
	return fmt.Sprintf("GET %s: response larger than %d bytes", e.url, e.max)
}

// capClient returns a copy of hc whose responses are capped at max bytes,
// and the transport that says whether the cap tripped.
func capClient(hc *http.Client, max int64) (*http.Client, *cappedTransport) {
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	t := &cappedTransport{base: base, max: max}
	capped := *hc
	capped.Transport = t
	return &capped, t
}

func (t *cappedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	tooLarge := &errBodyTooLarge{url: req.URL.Redacted(), max: t.max}
	if resp.ContentLength > t.max {
		resp.Body.Close()
		t.exceeded.Store(true)
		return nil, tooLarge
	}
	resp.Body = &cappedBody{ReadCloser: resp.Body, left: t.max, err: tooLarge, tripped: &t.exceeded}
	return resp, nil
}

// cappedBody reads at most left bytes and fails on the one after.
type cappedBody struct {
	io.ReadCloser
	left    int64
	err     error
	tripped *atomic.Bool
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	if int64(n) > b.left {
		b.tripped.Store(true)
		b.left = 0
		return 0, b.err
	}
	b.left -= int64(n)
	return n, err
}
