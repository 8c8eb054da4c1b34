package image

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"os"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"
)

// keepCompressedBelow is the largest compressed layer kept in memory
// between computing its digest and uploading it; a larger one is
// compressed again if it has to be uploaded.
const keepCompressedBelow = 64 << 20

// compressionLevel is gzip's fastest, as go-containerregistry's tarball
// layers use, from klauspost/compress rather than the standard library:
// 176 against 1,530 MB/s on an incompressible 20 MiB layer (it stores
// blocks that do not compress instead of encoding them), and about
// twice as fast on Go binaries, which made the cold gzip build slower than
// crane's. The compressor and its level are part of the layer digest:
// changing either (or a klauspost/compress update changing its output)
// changes every blob digest once, and an image whose inputs changed
// pushes its layers once more.
const compressionLevel = gzip.BestSpeed

// blobInfo is what compressing a layer tar taught: its blob digest and size.
type blobInfo struct {
	digest v1.Hash
	size   int64
}

// compressedDigests remembers the blob digest of every layer tar (by its
// diff ID) this process compressed. Compression is deterministic (the same
// gzip code and level, no header timestamp), so the blob digest is a
// function of the tar: once a layer's tar is hashed and found known, its
// compression (started alongside) is abandoned, and an unchanged image
// costs little more than one read of its sources.
type compressedDigests struct {
	mu sync.Mutex
	m  map[v1.Hash]blobInfo
}

// maxCompressedDigests bounds the memory of a long-running operator; the
// map is emptied when full and refills with what is built next.
const maxCompressedDigests = 4096

func (c *compressedDigests) get(diffID v1.Hash) (blobInfo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	info, ok := c.m[diffID]
	return info, ok
}

func (c *compressedDigests) put(diffID v1.Hash, info blobInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCompressedDigests {
		c.m = map[v1.Hash]blobInfo{}
	}
	c.m[diffID] = info
}

// sourceLayer is a layer made from source files. Its tar is written again
// from the files whenever its content is read, so nothing is held but the
// digests (and small compressed blobs, kept for the upload that usually
// follows).
type sourceLayer struct {
	writeTar  func(io.Writer) error
	mediaType types.MediaType
	diffID    v1.Hash
	blob      blobInfo
	// compressed is the blob when it was compressed by this build and is
	// smaller than keepCompressedBelow; nil otherwise.
	compressed [][]byte
	// file is the blob as a file, when the layer is a prebuilt blob of
	// the source (newPrebuiltLayer found them the same): read as it is,
	// not written again (a live update reads the changed layer on the
	// path of the change, while the image is pushed beside it).
	file string
}

// newSourceLayer hashes the tar writeTar writes to get the layer's diff ID
// and, unless that tar was compressed before, compresses it to get the blob
// digest. Both run at once, each on its own core: a build usually has a
// changed layer (the binary of the inner loop), and compressing it after
// hashing would double its wait. When the diff ID turns out to be known,
// the compression is abandoned.
func newSourceLayer(writeTar func(io.Writer) error, known *compressedDigests) (*sourceLayer, error) {
	l := &sourceLayer{writeTar: writeTar, mediaType: types.OCILayer}

	abandon := make(chan struct{})
	compressed := make(chan compressResult, 1)
	go func() { compressed <- compress(writeTar, abandon) }()

	h := sha256.New()
	err := writeTar(h)
	var wasKnown bool
	if err == nil {
		l.diffID = hashOf(h.Sum(nil))
		l.blob, wasKnown = known.get(l.diffID)
	}
	if err != nil || wasKnown {
		close(abandon)
		<-compressed
		if err != nil {
			return nil, err
		}
		return l, nil
	}

	r := <-compressed
	if r.err != nil {
		return nil, r.err
	}
	l.blob, l.compressed = r.blob, r.chunks
	known.put(l.diffID, l.blob)
	return l, nil
}

// newUncompressedLayer makes a layer whose blob is its tar: one sha256
// gives both digests, and the tar is kept for the upload when small.
func newUncompressedLayer(writeTar func(io.Writer) error) (*sourceLayer, error) {
	l := &sourceLayer{writeTar: writeTar, mediaType: types.OCIUncompressedLayer}
	h := sha256.New()
	keep := &chunkBuffer{limit: keepCompressedBelow}
	counter := &countingWriter{}
	if err := writeTar(io.MultiWriter(h, keep, counter)); err != nil {
		return nil, err
	}
	l.diffID = hashOf(h.Sum(nil))
	l.blob = blobInfo{digest: l.diffID, size: counter.n}
	l.compressed = keep.content()
	return l, nil
}

// countingWriter counts what is written to it.
type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

// compressResult is the outcome of compress.
type compressResult struct {
	blob   blobInfo
	chunks [][]byte
	err    error
}

// compress compresses the tar writeTar writes, hashing the blob on another
// core meanwhile and keeping it if small; it stops when abandon closes.
func compress(writeTar func(io.Writer) error, abandon <-chan struct{}) compressResult {
	digest := newAsyncHash()
	keep := &chunkBuffer{limit: keepCompressedBelow}
	err := writeCompressed(&abandonableWriter{w: io.MultiWriter(digest, keep), abandon: abandon}, writeTar)
	sum, size := digest.finish()
	if err != nil {
		return compressResult{err: err}
	}
	return compressResult{blob: blobInfo{digest: hashOf(sum), size: size}, chunks: keep.content()}
}

// errAbandoned stops a compression nobody waits for.
var errAbandoned = errors.New("compression abandoned")

// abandonableWriter fails its writes once abandon is closed.
type abandonableWriter struct {
	w       io.Writer
	abandon <-chan struct{}
}

// Write writes p unless the compression was abandoned.
func (a *abandonableWriter) Write(p []byte) (int, error) {
	select {
	case <-a.abandon:
		return 0, errAbandoned
	default:
		return a.w.Write(p)
	}
}

// writeCompressed writes the gzip of the tar writeTar writes to w.
func writeCompressed(w io.Writer, writeTar func(io.Writer) error) error {
	gz, err := gzip.NewWriterLevel(w, compressionLevel)
	if err != nil {
		return err
	}
	if err := writeTar(gz); err != nil {
		return err
	}
	return gz.Close()
}

// Digest is the sha256 of the compressed blob.
func (l *sourceLayer) Digest() (v1.Hash, error) { return l.blob.digest, nil }

// DiffID is the sha256 of the tar.
func (l *sourceLayer) DiffID() (v1.Hash, error) { return l.diffID, nil }

// Size is the size of the compressed blob.
func (l *sourceLayer) Size() (int64, error) { return l.blob.size, nil }

// MediaType is an OCI gzip or uncompressed layer; images on a Docker base
// override it in their manifest (mutate.Addendum.MediaType).
func (l *sourceLayer) MediaType() (types.MediaType, error) { return l.mediaType, nil }

// Compressed returns the blob (the gzip, or the tar of an uncompressed
// layer), kept or written again.
func (l *sourceLayer) Compressed() (io.ReadCloser, error) {
	if l.compressed != nil {
		readers := make([]io.Reader, len(l.compressed))
		for i, c := range l.compressed {
			readers[i] = bytes.NewReader(c)
		}
		return io.NopCloser(io.MultiReader(readers...)), nil
	}
	if l.mediaType == types.OCIUncompressedLayer {
		return l.Uncompressed()
	}
	return pipe(func(w io.Writer) error { return writeCompressed(w, l.writeTar) }), nil
}

// Uncompressed returns the tar: the prebuilt file, or written again (also
// when the store lost the file meanwhile).
func (l *sourceLayer) Uncompressed() (io.ReadCloser, error) {
	if l.file != "" {
		if f, err := os.Open(l.file); err == nil {
			return f, nil
		}
	}
	return pipe(l.writeTar), nil
}

// pipe runs write in a goroutine and returns what it writes as a reader;
// closing the reader early stops the writer.
func pipe(write func(io.Writer) error) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(write(pw)) }()
	return pr
}

func hashOf(sum []byte) v1.Hash {
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum)}
}

// asyncHash is a sha256 writer that hashes in its own goroutine, so the
// writer (a compressor) goes on meanwhile.
type asyncHash struct {
	chunks chan []byte
	done   chan struct{}
	h      hash.Hash
	n      int64
}

func newAsyncHash() *asyncHash {
	a := &asyncHash{chunks: make(chan []byte, 16), done: make(chan struct{}), h: sha256.New()}
	go func() {
		defer close(a.done)
		for c := range a.chunks {
			a.h.Write(c)
		}
	}()
	return a
}

// Write queues a copy of p: the caller may reuse p at once.
func (a *asyncHash) Write(p []byte) (int, error) {
	a.n += int64(len(p))
	a.chunks <- bytes.Clone(p)
	return len(p), nil
}

// finish waits for the hashing and returns the sum and the bytes written.
func (a *asyncHash) finish() ([]byte, int64) {
	close(a.chunks)
	<-a.done
	return a.h.Sum(nil), a.n
}

// chunkSize is the allocation unit of chunkBuffer: growing by whole chunks
// never copies what is already kept.
const chunkSize = 1 << 20

// chunkBuffer keeps what is written to it, in chunks, until it grows past
// limit; then it drops it all and keeps nothing.
type chunkBuffer struct {
	limit    int
	n        int
	chunks   [][]byte
	overflow bool
}

// Write keeps a copy of p while the content stays under the limit.
func (b *chunkBuffer) Write(p []byte) (int, error) {
	if b.overflow {
		return len(p), nil
	}
	if b.n+len(p) > b.limit {
		b.overflow, b.chunks = true, nil
		return len(p), nil
	}
	b.n += len(p)
	for rest := p; len(rest) > 0; {
		if len(b.chunks) == 0 || len(b.chunks[len(b.chunks)-1]) == chunkSize {
			b.chunks = append(b.chunks, make([]byte, 0, chunkSize))
		}
		last := &b.chunks[len(b.chunks)-1]
		k := min(chunkSize-len(*last), len(rest))
		*last = append(*last, rest[:k]...)
		rest = rest[k:]
	}
	return len(p), nil
}

// content returns the chunks, or nil if the content grew past the limit.
func (b *chunkBuffer) content() [][]byte {
	if b.overflow {
		return nil
	}
	return b.chunks
}
