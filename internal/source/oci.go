package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// errPlainHTTP is what the guard answers instead of sending a request in
// the clear.
var errPlainHTTP = errors.New("plain HTTP refused")

// httpGuard refuses plain-HTTP requests unless the source says insecure.
// go-containerregistry silently falls back to HTTP for localhost and
// private addresses; the design promises that plain HTTP happens only when
// asked for. refused records that it said no, because the library reports
// its ping failures in an error type that hides their causes.
type httpGuard struct {
	base     http.RoundTripper
	insecure bool
	refused  atomic.Bool
}

func (g *httpGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" && !g.insecure {
		g.refused.Store(true)
		return nil, errPlainHTTP
	}
	resp, err := g.base.RoundTrip(req)
	if err == nil && strings.Contains(req.URL.Path, "/manifests/") {
		// The registry is the tenant's choice and the client reads a
		// manifest whole (up to 100 MiB): a source's is kept far smaller.
		resp.Body = &cappedManifest{ReadCloser: resp.Body, left: maxManifestSize}
	}
	return resp, err
}

// maxManifestSize bounds an OCI manifest read for a source; real ones
// take kilobytes.
const maxManifestSize = 4 << 20

// errManifestTooLarge is what reading past maxManifestSize fails with.
var errManifestTooLarge = fmt.Errorf("manifest larger than %d bytes", maxManifestSize)

// cappedManifest fails a manifest body once it passes maxManifestSize.
type cappedManifest struct {
	io.ReadCloser
	left int64
}

func (c *cappedManifest) Read(p []byte) (int, error) {
	if c.left < 0 {
		return 0, errManifestTooLarge
	}
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.ReadCloser.Read(p)
	c.left -= int64(n)
	if c.left < 0 {
		return n, errManifestTooLarge
	}
	return n, err
}

// ociClient is everything one registry operation needs.
type ociClient struct {
	guard *httpGuard
	opts  []remote.Option
}

func (f *Fetcher) ociClient(ctx context.Context, insecure bool, creds *Credentials) (*ociClient, error) {
	base := http.DefaultTransport
	if hc := f.httpClient(); hc.Transport != nil {
		base = hc.Transport
	}
	g := &httpGuard{base: base, insecure: insecure}
	opts := []remote.Option{
		remote.WithContext(ctx),
		remote.WithTransport(g),
		// A short in-call retry rides over a blip; anything longer is the
		// reconciler's backoff, which does not hold a worker meanwhile.
		remote.WithRetryBackoff(remote.Backoff{Duration: 250 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 3}),
	}
	keychain, err := ociAuth(creds)
	if err != nil {
		return nil, err
	}
	if keychain != nil {
		opts = append(opts, remote.WithAuthFromKeychain(keychain))
	}
	return &ociClient{guard: g, opts: opts}, nil
}

func parseRepository(repo string, insecure bool) (name.Repository, error) {
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	return name.NewRepository(repo, opts...)
}

func (f *Fetcher) resolveOCI(ctx context.Context, namespace string, src v1alpha1.Source) (Ref, error) {
	o := src.OCI
	s := subject{src.Name, "oci", o.Repository}
	repo, err := parseRepository(o.Repository, o.Insecure)
	if err != nil {
		return Ref{}, s.permanent("invalid repository: %v", err)
	}
	ref := Ref{Source: src.Name, Kind: KindOCI, URL: o.Repository, Insecure: o.Insecure}
	if o.Digest != "" {
		if !validDigest.MatchString(o.Digest) || !strings.HasPrefix(o.Digest, "sha256:") {
			return Ref{}, s.permanent("invalid digest %q", o.Digest)
		}
		// A digest names itself: nothing to ask the registry.
		ref.Revision, ref.ID, ref.Digest = o.Digest, strings.TrimPrefix(o.Digest, "sha256:"), o.Digest
		return ref, nil
	}
	tag := o.Tag
	if tag == "" {
		tag = "latest"
	}
	creds, err := loadCredentials(ctx, f.Reader, namespace, src)
	if err != nil {
		return Ref{}, err
	}
	c, err := f.ociClient(ctx, o.Insecure, creds)
	if err != nil {
		return Ref{}, s.permanent("%v", err)
	}
	desc, err := remote.Head(repo.Tag(tag), c.opts...)
	if err != nil {
		classified := c.error(s, fmt.Sprintf("tag %q", tag), err)
		if notFound(err) && !c.guard.refused.Load() {
			// Not pushed yet (not_pushed.go): waited for, not stalled.
			return Ref{}, &notPushedError{repository: o.Repository, tag: tag, err: classified}
		}
		return Ref{}, classified
	}
	d := desc.Digest.String()
	ref.Revision, ref.ID, ref.Digest = tag+"@"+d, desc.Digest.Hex, d
	return ref, nil
}

func (f *Fetcher) fetchOCI(s subject, ref Ref, creds *Credentials) filler {
	return func(ctx context.Context, content, scratch string) (entryMeta, error) {
		repo, err := parseRepository(ref.URL, ref.Insecure)
		if err != nil {
			return entryMeta{}, s.permanent("invalid repository: %v", err)
		}
		c, err := f.ociClient(ctx, ref.Insecure, creds)
		if err != nil {
			return entryMeta{}, s.permanent("%v", err)
		}
		what := "manifest " + ref.Digest
		desc, err := remote.Get(repo.Digest(ref.Digest), c.opts...)
		if err != nil {
			// With the environment's credentials this GET is its access
			// check (servedTo): its failure is not the content's.
			return entryMeta{}, &accessFailure{c.error(s, what, err)}
		}
		if desc.MediaType.IsIndex() {
			return entryMeta{}, s.permanent("%s is an image index; a source must be a single artifact manifest", ref.Digest)
		}
		img, err := desc.Image()
		if err != nil {
			return entryMeta{}, s.permanent("%s is not an artifact manifest: %v", ref.Digest, err)
		}
		manifest, err := img.Manifest()
		if err != nil {
			return entryMeta{}, c.error(s, what, err)
		}
		layers, err := img.Layers()
		if err != nil {
			return entryMeta{}, c.error(s, what, err)
		}
		// The registry client reads a layer no further than its
		// descriptor's size; the sizes are checked before anything is
		// downloaded.
		var download int64
		for _, l := range manifest.Layers {
			download += max(l.Size, 0)
		}
		if limit := downloadLimit(f.maxSize()); download > limit {
			return entryMeta{}, s.permanent("%s: its layers take %d bytes, more than the %d a source may download", what, download, limit)
		}
		x, err := newExtractor(content, f.maxSize(), true)
		if err != nil {
			return entryMeta{}, err
		}
		defer x.close()
		meta := entryMeta{Digest: ref.Digest}
		deltas := newDeltaFill(&f.store().kept, ref.origin(), layers, manifest.Layers, scratch, filepath.Dir(content), f.maxSize())
		defer deltas.close()
		downloads := prefetchLayers(layers, manifest.Layers, scratch, deltas.skip)
		defer downloads.stop()
		for i, l := range layers {
			what := fmt.Sprintf("layer %d", i)
			if d, err := l.Digest(); err == nil {
				what += " (" + d.String() + ")"
			}
			desc := manifest.Layers[i]
			if desc.MediaType == MediaTypeDeltaBase {
				continue // read by the delta layer after it
			}
			m, isMapped, err := parseMapping(desc.Annotations)
			if err != nil {
				return entryMeta{}, s.wrap(fmt.Errorf("%s: %w", what, err))
			}
			x.mapped = nil
			if isMapped {
				x.mapped = &m
			}
			l, downloaded, err := downloads.layer(i, l)
			if err == nil && desc.MediaType == MediaTypeDelta {
				l, desc, downloaded, err = deltas.whole(downloads, i, l, desc, isMapped)
			}
			var prebuilt *PrebuiltLayer
			if err == nil {
				prebuilt, err = extractLayer(x, l, downloaded, desc, m, isMapped, filepath.Dir(content))
			}
			if err != nil {
				var re *readError
				if errors.As(err, &re) {
					return entryMeta{}, c.error(s, what, re.err)
				}
				return entryMeta{}, s.wrap(fmt.Errorf("%s: %w", what, err))
			}
			if prebuilt != nil {
				meta.Layers = append(meta.Layers, *prebuilt)
			}
		}
		if err := x.finish(); err != nil {
			return entryMeta{}, s.wrap(err)
		}
		meta.Bases = deltas.bases
		return meta, nil
	}
}

// maxTrailing bounds what a layer may hold after its tar's end: tar
// writers pad to a record of 10 KiB at most.
const maxTrailing = 1 << 20

// extractLayer extracts one layer of an artifact. The blob of an
// uncompressed mapped layer is also kept, under entry, for the builds that
// can use it as it is: linked from downloaded, the file it was downloaded
// to (on the store's file system), or else written as it is read. A
// failure of the registry is a *readError.
func extractLayer(x *extractor, l v1.Layer, downloaded string, desc v1.Descriptor, m mapping, isMapped bool, entry string) (*PrebuiltLayer, error) {
	keep := isMapped && isUncompressed(desc.MediaType)
	var rc io.ReadCloser
	var err error
	if keep {
		// The blob is the tar; a remote layer verifies its digest as it
		// streams.
		rc, err = l.Compressed()
	} else {
		// Uncompressed detects gzip or zstd and verifies the same way.
		rc, err = l.Uncompressed()
	}
	if err != nil {
		return nil, &readError{err} // the registry's failure
	}
	defer func() { _ = rc.Close() }()
	var in io.Reader = rc
	var blob *os.File
	file := blobFile(desc.Digest)
	if keep {
		if err := os.MkdirAll(filepath.Join(entry, layersDir), 0o755); err != nil {
			return nil, err
		}
		if downloaded == "" || os.Link(downloaded, filepath.Join(entry, file)) != nil {
			if blob, err = os.Create(filepath.Join(entry, file)); err != nil {
				return nil, err
			}
			defer func() { _ = blob.Close() }()
			in = io.TeeReader(rc, blob)
		}
	}
	if err := x.add(in); err != nil {
		return nil, err
	}
	// The tar ends before its blob may (padding to a record): read the
	// rest, so the digest is verified (at EOF) and a kept blob is whole,
	// but not without bound.
	n, err := io.Copy(io.Discard, io.LimitReader(in, maxTrailing+1))
	if err != nil {
		return nil, &readError{err}
	}
	if n > maxTrailing {
		return nil, unsafeContent("more than %d bytes after the end of the archive", maxTrailing)
	}
	if !keep {
		return nil, nil
	}
	if blob != nil {
		if err := blob.Close(); err != nil {
			return nil, err
		}
	}
	return &PrebuiltLayer{From: m.from, To: m.to, Digest: desc.Digest.String(), Size: desc.Size, MediaType: desc.MediaType, File: file}, nil
}

// error classifies a registry failure about what (a tag, a manifest, a
// layer).
func (c *ociClient) error(s subject, what string, err error) error {
	if errors.Is(err, errManifestTooLarge) {
		return s.permanent("%s: %v", what, errManifestTooLarge)
	}
	if c.guard.refused.Load() {
		// Either the registry speaks only plain HTTP or HTTPS failed and
		// the library fell back: both need the user to say insecure.
		return s.permanent("%s: %v (plain HTTP is used only with insecure: true)", what, err)
	}
	var te *transport.Error
	if errors.As(err, &te) {
		switch {
		case notFound(err):
			return s.permanent("%s not found", what)
		case te.StatusCode == http.StatusUnauthorized || hasCode(te, transport.UnauthorizedErrorCode):
			return s.permanent("%s: authentication required or credentials rejected (HTTP %d)", what, te.StatusCode)
		case te.StatusCode == http.StatusForbidden || hasCode(te, transport.DeniedErrorCode):
			return s.permanent("%s: access denied (HTTP %d)", what, te.StatusCode)
		case te.StatusCode == http.StatusTooManyRequests || te.StatusCode >= 500:
			return s.unavailable("%s: registry answered HTTP %d", what, te.StatusCode)
		}
		return s.permanent("%s: %v", what, err)
	}
	if strings.Contains(err.Error(), "error verifying") {
		// go-containerregistry's digest check on a blob or manifest.
		return s.permanent("%s: content does not match its digest: %v", what, err)
	}
	return s.wrap(fmt.Errorf("%s: %w", what, err))
}

// notFound says whether the registry answered that what was asked for
// (a tag, a digest, the repository itself) is not there.
func notFound(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && (te.StatusCode == http.StatusNotFound ||
		hasCode(te, transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode, transport.BlobUnknownErrorCode))
}

func hasCode(te *transport.Error, codes ...transport.ErrorCode) bool {
	for _, d := range te.Errors {
		for _, c := range codes {
			if d.Code == c {
				return true
			}
		}
	}
	return false
}

// checkOCIAccess is the access check of an OCI entry: the registry answers
// a HEAD of the manifest, by digest, with the environment's own
// credentials.
func (f *Fetcher) checkOCIAccess(ctx context.Context, s subject, ref Ref, creds *Credentials) error {
	repo, err := parseRepository(ref.URL, ref.Insecure)
	if err != nil {
		return s.permanent("invalid repository: %v", err)
	}
	c, err := f.ociClient(ctx, ref.Insecure, creds)
	if err != nil {
		return s.permanent("%v", err)
	}
	if _, err := remote.Head(repo.Digest(ref.Digest), c.opts...); err != nil {
		return c.error(s, "manifest "+ref.Digest, err)
	}
	return nil
}
