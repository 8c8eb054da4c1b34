package source

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// An artifact's layers were downloaded one after the other, each after the
// one before it was extracted: every layer cost the registry's time to
// first byte on the path of a change, and a pushed tree is several layers
// (chunks.go), most of them unchanged. Now the layers after the first are
// downloaded into the fill's scratch directory while the first is
// extracted; each is extracted, in order, once it is there.

// prefetchConcurrency is how many layers are downloaded at once.
const prefetchConcurrency = 3

// prefetch is the download of an artifact's layers after the first.
type prefetch struct {
	layers  []*prefetchedLayer
	stopped atomic.Bool
	wg      sync.WaitGroup

	mu sync.Mutex
	// open are the blobs being read: stop closes them, so a read waiting
	// on a registry that stopped answering ends at once rather than at
	// the fetch's deadline.
	open map[io.Closer]bool
}

// prefetchedLayer is one layer's download: done is closed when file holds
// the whole blob, its digest verified, or err says why not.
type prefetchedLayer struct {
	done chan struct{}
	desc v1.Descriptor
	file string
	err  error
}

// prefetchLayers starts downloading layers[1:] into dir, the earliest
// first, but those skip says are not needed (a delta's base the store
// holds). stop must be called before dir is removed.
func prefetchLayers(layers []v1.Layer, descs []v1.Descriptor, dir string, skip func(int) bool) *prefetch {
	p := &prefetch{layers: make([]*prefetchedLayer, len(layers))}
	if len(layers) < 2 {
		return p
	}
	slots := make(chan struct{}, prefetchConcurrency)
	for i := 1; i < len(layers); i++ {
		if skip(i) {
			continue
		}
		pl := &prefetchedLayer{done: make(chan struct{}), desc: descs[i], file: filepath.Join(dir, fmt.Sprintf("layer-%d", i))}
		p.layers[i] = pl
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for i := 1; i < len(layers); i++ {
			pl := p.layers[i]
			if pl == nil {
				continue
			}
			slots <- struct{}{}
			if p.stopped.Load() {
				pl.err = errPrefetchStopped
				close(pl.done)
				<-slots
				continue
			}
			p.wg.Add(1)
			go func(l v1.Layer) {
				defer p.wg.Done()
				defer func() { <-slots }()
				defer close(pl.done)
				pl.err = p.download(l, pl)
			}(layers[i])
		}
	}()
	return p
}

var errPrefetchStopped = errors.New("download stopped")

// download copies l's blob into pl.file. The registry client's reader
// verifies the digest and size at the end: a blob that reads to its end
// without error is the one the manifest names.
func (p *prefetch) download(l v1.Layer, pl *prefetchedLayer) error {
	rc, err := l.Compressed()
	if err != nil {
		return &readError{err}
	}
	if !p.track(rc) {
		_ = rc.Close()
		return errPrefetchStopped
	}
	defer func() {
		p.untrack(rc)
		_ = rc.Close()
	}()
	f, err := os.Create(pl.file)
	if err != nil {
		return err
	}
	// The registry client reads no further than the descriptor's size;
	// stop closes rc, which ends the copy.
	_, err = io.CopyBuffer(writerOnly{f}, rc, make([]byte, copyBuffer))
	if cerr := f.Close(); err == nil && cerr != nil {
		return cerr
	}
	if p.stopped.Load() {
		return errPrefetchStopped
	}
	if err != nil {
		return &readError{err}
	}
	return nil
}

// track notes rc as being read; false once stopped.
func (p *prefetch) track(rc io.Closer) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped.Load() {
		return false
	}
	if p.open == nil {
		p.open = map[io.Closer]bool{}
	}
	p.open[rc] = true
	return true
}

func (p *prefetch) untrack(rc io.Closer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.open, rc)
}

// layer is layer i as downloaded, once it is there, and the file its blob
// is in; l itself and "" for the first, read as it is extracted.
func (p *prefetch) layer(i int, l v1.Layer) (v1.Layer, string, error) {
	pl := p.layers[i]
	if pl == nil {
		return l, "", nil
	}
	<-pl.done
	if pl.err != nil {
		return nil, "", pl.err
	}
	dl, err := pl.asLayer()
	return dl, pl.file, err
}

// asLayer is the downloaded blob as a layer.
func (pl *prefetchedLayer) asLayer() (v1.Layer, error) {
	return partial.CompressedToLayer(&downloadedBlob{pl})
}

// stop ends the downloads not finished and waits for every one to end.
func (p *prefetch) stop() {
	p.mu.Lock()
	p.stopped.Store(true)
	for rc := range p.open {
		_ = rc.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// downloadedBlob is a prefetched layer's blob, as a compressed layer.
type downloadedBlob struct{ pl *prefetchedLayer }

func (b *downloadedBlob) Digest() (v1.Hash, error)            { return b.pl.desc.Digest, nil }
func (b *downloadedBlob) Size() (int64, error)                { return b.pl.desc.Size, nil }
func (b *downloadedBlob) MediaType() (types.MediaType, error) { return b.pl.desc.MediaType, nil }
func (b *downloadedBlob) Compressed() (io.ReadCloser, error)  { return os.Open(b.pl.file) }
