package build

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// keepCompressedBelow is the largest compressed layer kept in memory
// between computing its digest and uploading it; a larger one is
// compressed again if it has to be uploaded.
const keepCompressedBelow = 64 << 20

// compressionLevel is gzip's fastest, as go-containerregistry's tarball
// layers use. It is part of the layer digest: changing it changes every
// digest once (and pushes every layer once).
const compressionLevel = gzip.BestSpeed

// blobInfo is what compressing a layer tar taught: its blob digest and size.
type blobInfo struct {
	digest v1.Hash
	size   int64
}

// compressedDigests remembers the blob digest of every layer tar (by its
// diff ID) this process compressed. Compression is deterministic (the same
// gzip code and level, no header timestamp), so the blob digest is a
// function of the tar: a layer whose tar did not change is hashed, not
// compressed again, and an unchanged image costs one read of its sources.
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
	compressed []byte
}

// newSourceLayer hashes the tar writeTar writes and, unless known already,
// compresses it once to learn the blob digest.
func newSourceLayer(writeTar func(io.Writer) error, known *compressedDigests) (*sourceLayer, error) {
	l := &sourceLayer{writeTar: writeTar, mediaType: types.OCILayer}
	h := sha256.New()
	if err := writeTar(h); err != nil {
		return nil, err
	}
	l.diffID = hashOf(h.Sum(nil))

	if info, ok := known.get(l.diffID); ok {
		l.blob = info
		return l, nil
	}
	digest := sha256.New()
	counter := &countingWriter{}
	keep := &boundedBuffer{limit: keepCompressedBelow}
	if err := writeCompressed(io.MultiWriter(digest, counter, keep), writeTar); err != nil {
		return nil, err
	}
	l.blob = blobInfo{digest: hashOf(digest.Sum(nil)), size: counter.n}
	l.compressed = keep.bytes()
	known.put(l.diffID, l.blob)
	return l, nil
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

// MediaType is an OCI gzip layer; images on a Docker base override it in
// their manifest (mutate.Addendum.MediaType).
func (l *sourceLayer) MediaType() (types.MediaType, error) { return l.mediaType, nil }

// Compressed returns the gzip blob, kept or compressed again.
func (l *sourceLayer) Compressed() (io.ReadCloser, error) {
	if l.compressed != nil {
		return io.NopCloser(bytes.NewReader(l.compressed)), nil
	}
	return pipe(func(w io.Writer) error { return writeCompressed(w, l.writeTar) }), nil
}

// Uncompressed returns the tar.
func (l *sourceLayer) Uncompressed() (io.ReadCloser, error) {
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

// countingWriter counts the bytes written to it.
type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

// boundedBuffer keeps what is written to it until it grows past limit, then
// drops it all and keeps nothing.
type boundedBuffer struct {
	limit    int
	buf      bytes.Buffer
	overflow bool
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if b.overflow {
		return len(p), nil
	}
	if b.buf.Len()+len(p) > b.limit {
		b.overflow = true
		b.buf = bytes.Buffer{}
		return len(p), nil
	}
	return b.buf.Write(p)
}

// bytes returns the content, or nil if it grew past the limit.
func (b *boundedBuffer) bytes() []byte {
	if b.overflow {
		return nil
	}
	return b.buf.Bytes()
}
