package source

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/devloop-dev/devloop/internal/testregistry"
)

// roundTrips counts requests and delays each by rtt: a stand-in for a
// link's round trip on one open connection (docs/shaped-link.md has the
// real link).
type roundTrips struct {
	base http.RoundTripper
	rtt  time.Duration
	n    atomic.Int64
}

func (r *roundTrips) RoundTrip(req *http.Request) (*http.Response, error) {
	r.n.Add(1)
	time.Sleep(r.rtt)
	return r.base.RoundTrip(req)
}

// BenchmarkPushAfterAnEdit (issue 46): a one-file edit of a 1,200-file
// tree packed and pushed to the real registry, as a process per push did
// it (a new client, every blob asked about) and as push --watch does now
// (one client, the blobs of the last manifest not asked about), with no
// added round trip and with 40 ms (the home link's). Prints requests and
// bytes per push; no timing asserts.
//
//	go test ./internal/source -run '^$' -bench PushAfterAnEdit -benchtime 10x
func BenchmarkPushAfterAnEdit(b *testing.B) {
	host := testregistry.Start(b)
	root := projectTree(b, 300, 4)
	for _, rtt := range []time.Duration{0, 40 * time.Millisecond} {
		for _, how := range []string{"new-client-asks-every-blob", "one-client-remembers"} {
			b.Run(fmt.Sprintf("rtt=%s/%s", rtt, how), func(b *testing.B) {
				link := &roundTrips{base: http.DefaultTransport, rtt: rtt}
				o := PushOptions{Insecure: true, Transport: link}
				ref := fmt.Sprintf("%s/bench/%s-%d:dev", host, how, rtt.Milliseconds())
				watch := NewPusher(o, &Remembered{})
				ctx := context.Background()
				push := func(p *Pusher) int64 {
					img, err := PackDir(root, nil, CompressionNone)
					if err != nil {
						b.Fatal(err)
					}
					stats, err := p.Push(ctx, img, ref)
					if err != nil {
						b.Fatal(err)
					}
					return stats.Sent
				}
				push(watch) // the tree is in the registry before the edits
				link.n.Store(0)
				var sent int64
				b.ResetTimer()
				for i := range b.N {
					editFile(b, root, "pkg/p123/f1.go", fmt.Sprintf("package p123 // edit %d %s\n", i, how))
					p := watch
					if how == "new-client-asks-every-blob" {
						p = NewPusher(o, nil)
					}
					sent += push(p)
				}
				b.ReportMetric(float64(link.n.Load())/float64(b.N), "requests/op")
				b.ReportMetric(float64(sent)/float64(b.N)/1024, "KiB-sent/op")
			})
		}
	}
}
