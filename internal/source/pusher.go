package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"golang.org/x/sync/errgroup"
)

// Pusher pushes artifacts over one registry client: one transport, so
// connections are kept alive between pushes, and one authentication per
// repository, however many pushes a `push --watch` makes (issue 46).
//
// It asks the registry about no blob the last manifest it pushed to the
// repository named (Remembered): across a link every such HEAD is a round
// trip, and after an edit all but one of a tree's layers are such blobs.
// The registry stays the truth: if it no longer holds one of them (it was
// garbage-collected, the registry was reset), it refuses the manifest, the
// memory is forgotten and the artifact pushed again asking about every
// blob.
type Pusher struct {
	o      PushOptions
	guard  *httpGuard
	memory *Remembered

	mu     sync.Mutex
	remote *remote.Pusher
}

// PushStats say what one push sent.
type PushStats struct {
	// Sent is the bytes of blobs uploaded (not those the registry had).
	Sent int64
	// Remembered is how many blobs were taken as present because the
	// last manifest pushed to the repository named them.
	Remembered int
	// Checked is how many blobs the registry was asked about (and
	// uploaded when it lacked them).
	Checked int
}

// NewPusher is a Pusher reaching the registry as o says; memory may be
// nil (then every blob is asked about, as remote.Write does).
func NewPusher(o PushOptions, memory *Remembered) *Pusher {
	base := o.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	return &Pusher{o: o, guard: &httpGuard{base: base, insecure: o.Insecure}, memory: memory}
}

// pushConcurrency is how many blobs are uploaded at once (remote.Write's
// default too).
const pushConcurrency = 4

// Push pushes img to ref (repository:tag).
func (p *Pusher) Push(ctx context.Context, img v1.Image, ref string) (PushStats, error) {
	r, err := parsePushRef(ref, p.o.Insecure)
	if err != nil {
		return PushStats{}, err
	}
	repo := r.Context().Name()
	known := p.memory.Blobs(repo)
	stats, blobs, err := p.push(ctx, img, r, known)
	if err != nil && len(known) > 0 && !denied(err) {
		// The registry lacks a blob the memory said it had: forget it,
		// and push again with a client that asks about every blob (the
		// old one remembers what it uploaded too).
		p.memory.Forget(repo)
		p.mu.Lock()
		p.remote = nil
		p.mu.Unlock()
		stats, blobs, err = p.push(ctx, img, r, nil)
	}
	if err != nil {
		return stats, pushError(p.guard, ref, err)
	}
	p.memory.Remember(repo, blobs)
	return stats, nil
}

// push uploads the blobs of img that known does not name, then the
// manifest; it returns every blob the manifest names.
func (p *Pusher) push(ctx context.Context, img v1.Image, ref name.Reference, known map[v1.Hash]bool) (PushStats, []v1.Hash, error) {
	var stats PushStats
	rp, err := p.client()
	if err != nil {
		return stats, nil, err
	}
	layers, err := img.Layers()
	if err != nil {
		return stats, nil, err
	}
	config, err := partial.ConfigLayer(img)
	if err != nil {
		return stats, nil, err
	}
	var sent atomic.Int64
	var blobs []v1.Hash
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(pushConcurrency)
	for _, l := range append(layers, config) {
		d, err := l.Digest()
		if err != nil {
			return stats, nil, err
		}
		blobs = append(blobs, d)
		if known[d] {
			stats.Remembered++
			continue
		}
		stats.Checked++
		g.Go(func() error { return rp.Upload(gctx, ref.Context(), countedLayer{Layer: l, sent: &sent}) })
	}
	if err := g.Wait(); err != nil {
		return stats, nil, err
	}
	stats.Sent = sent.Load()
	// Put, not Push: no HEAD of the manifest first (a push is of new
	// content; pushOnce asks the registry only about content the
	// environment already has).
	if err := rp.Put(ctx, ref, img); err != nil {
		return stats, nil, err
	}
	return stats, blobs, nil
}

// client is the registry client, made once (again after a failed push
// that forgot the memory).
func (p *Pusher) client() (*remote.Pusher, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.remote != nil {
		return p.remote, nil
	}
	opts := []remote.Option{remote.WithTransport(p.guard), remote.WithJobs(pushConcurrency)}
	if p.o.Keychain != nil {
		opts = append(opts, remote.WithAuthFromKeychain(p.o.Keychain))
	}
	rp, err := remote.NewPusher(opts...)
	if err != nil {
		return nil, err
	}
	p.remote = rp
	return rp, nil
}

// denied says whether err is the registry refusing the credentials, which
// a second push would not change.
func denied(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && (te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden)
}

// countedLayer counts the bytes the upload reads of a layer: those the
// registry did not have.
type countedLayer struct {
	v1.Layer
	sent *atomic.Int64
}

func (l countedLayer) Compressed() (io.ReadCloser, error) {
	rc, err := l.Layer.Compressed()
	if err != nil {
		return nil, err
	}
	return &countingReader{ReadCloser: rc, n: l.sent}, nil
}

type countingReader struct {
	io.ReadCloser
	n *atomic.Int64
}

func (r *countingReader) Read(b []byte) (int, error) {
	n, err := r.ReadCloser.Read(b)
	r.n.Add(int64(n))
	return n, err
}

// String is the stats as push prints them: "350.0 KiB in 2 blobs, 13
// known from the last push".
func (s PushStats) String() string {
	out := fmt.Sprintf("%s sent, %d of %d blobs checked", humanSize(s.Sent), s.Checked, s.Checked+s.Remembered)
	if s.Remembered > 0 {
		out += fmt.Sprintf(", %d known from the last push", s.Remembered)
	}
	return out
}

func humanSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
