package source

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// epoch is the time of every pushed entry, so pushes are reproducible.
var epoch = time.Unix(0, 0)

// ExcludeFunc says whether the entry at rel (slash-separated, relative to
// the packed directory) stays out of an artifact. An excluded directory is
// not descended into, as git does with an ignored directory.
type ExcludeFunc func(rel string, isDir bool) bool

// PushOptions say how to reach the registry an artifact goes to.
type PushOptions struct {
	// Insecure allows plain HTTP. Without it plain HTTP is refused, also
	// for localhost, as the fetcher refuses it: a push the environment
	// cannot fetch back helps nobody.
	Insecure bool
	// Keychain resolves credentials; anonymous when nil.
	Keychain authn.Keychain
	// Exclude leaves entries out of the artifact.
	Exclude ExcludeFunc
	// Compression of the layer; auto (the zero value) leaves a local
	// registry's layer uncompressed (see LocalRegistry).
	Compression Compression
	// Transport carries the requests (http.DefaultTransport when nil).
	Transport http.RoundTripper
}

// PushOption changes PushOptions.
type PushOption func(*PushOptions)

// WithExclude leaves the entries exclude names out of the artifact.
func WithExclude(exclude ExcludeFunc) PushOption {
	return func(o *PushOptions) { o.Exclude = exclude }
}

// WithKeychain authenticates to the registry with k.
func WithKeychain(k authn.Keychain) PushOption {
	return func(o *PushOptions) { o.Keychain = k }
}

// PushDir packs a directory as a one-layer OCI artifact and pushes it to
// ref (repository:tag): the content an OCI source fetches. Entries are
// sorted with fixed times and owners, so the same tree pushes the same
// digest. It is what `kubectl devloop push` and `make run-local` use.
func PushDir(ctx context.Context, dir, ref string, insecure bool, opts ...PushOption) (v1.Hash, error) {
	o := PushOptions{Insecure: insecure}
	for _, opt := range opts {
		opt(&o)
	}
	r, err := parsePushRef(ref, insecure)
	if err != nil {
		return v1.Hash{}, err
	}
	img, err := PackDir(dir, o.Exclude, o.Compression.For(r.Context().RegistryStr()))
	if err != nil {
		return v1.Hash{}, err
	}
	if err := PushArtifact(ctx, img, ref, o); err != nil {
		return v1.Hash{}, fmt.Errorf("pushing %s: %w", dir, err)
	}
	return img.Digest()
}

// PackDir packs dir, without what exclude names, as an artifact whose
// tree is split into layers at stable places (chunks.go), so a push after
// an edit uploads only the layers holding what changed; each layer is
// compressed as c says (CompressionAuto is gzip). Entries are in lexical
// order with fixed times and numeric owners 0, so the digest depends only
// on names, modes, contents and the compression.
//
// Each of mapped holds the files of its From path instead of those
// layers, and follows them with its annotations (see MappedLayer).
func PackDir(dir string, exclude ExcludeFunc, c Compression, mapped ...MappedLayer) (v1.Image, error) {
	return packDir(dir, exclude, c, splitTree, mapped...)
}

// PackDirOneLayer is PackDir with the whole tree in one layer, for those
// that read exactly one (a Flux artifact).
func PackDirOneLayer(dir string, exclude ExcludeFunc, c Compression) (v1.Image, error) {
	return packDir(dir, exclude, c, func(entries []treeEntry) [][]treeEntry { return [][]treeEntry{entries} })
}

func packDir(dir string, exclude ExcludeFunc, c Compression, split func([]treeEntry) [][]treeEntry, mapped ...MappedLayer) (v1.Image, error) {
	if err := validateMapped(mapped); err != nil {
		return nil, fmt.Errorf("packing %s: %w", dir, err)
	}
	if len(mapped) > 0 {
		exclude = excludeMapped(exclude, mapped)
	}
	var entries []treeEntry
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if exclude != nil && exclude(rel, d.IsDir()) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		entries = append(entries, treeEntry{path: path, rel: rel, dir: d.IsDir(), size: info.Size(), d: d})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("packing %s: %w", dir, err)
	}
	var adds []mutate.Addendum
	for _, chunk := range split(entries) {
		layer, err := packLayer(chunk, c)
		if err != nil {
			return nil, fmt.Errorf("packing %s: %w", dir, err)
		}
		adds = append(adds, mutate.Addendum{Layer: layer})
	}
	for _, m := range mapped {
		delta, ok, err := deltaAddenda(m, m.Base)
		if err != nil {
			return nil, fmt.Errorf("packing %s: %w", dir, err)
		}
		if ok {
			adds = append(adds, delta...)
			continue
		}
		adds = append(adds, mutate.Addendum{Layer: m.Layer, Annotations: map[string]string{
			AnnotationLayerFrom: m.From, AnnotationLayerTo: m.To}})
	}
	return mutate.Append(empty.Image, adds...)
}

// packLayer is one layer of entries, compressed as c says.
func packLayer(entries []treeEntry, c Compression) (v1.Layer, error) {
	var buf bytes.Buffer
	buf.Grow(tarSize(entries))
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		if err := addEntry(tw, e.path, e.rel, e.d); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	if c == CompressionNone {
		// The tar is the blob: one sha256 gives digest and diff ID.
		return static.NewLayer(data, types.OCIUncompressedLayer), nil
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
}

// tarSize is about the size of entries' tar (tarsize.go).
func tarSize(entries []treeEntry) int {
	n := TarEnd
	for _, e := range entries {
		n += TarEntrySize(len(e.rel), e.size)
	}
	return n
}

// excludeMapped also leaves out what the mapped layers hold.
func excludeMapped(exclude ExcludeFunc, mapped []MappedLayer) ExcludeFunc {
	return func(rel string, isDir bool) bool {
		for _, m := range mapped {
			if Covers(m.From, rel) {
				return true
			}
		}
		return exclude != nil && exclude(rel, isDir)
	}
}

// addEntry writes one entry with fixed times and owners.
func addEntry(tw *tar.Writer, path, rel string, d fs.DirEntry) error {
	info, err := d.Info()
	if err != nil {
		return err
	}
	link := ""
	if info.Mode()&fs.ModeSymlink != 0 {
		if link, err = os.Readlink(path); err != nil {
			return err
		}
		if target := filepath.ToSlash(filepath.Join(filepath.Dir(filepath.FromSlash(rel)), link)); filepath.IsAbs(link) || target == ".." || strings.HasPrefix(target, "../") {
			// The operator refuses such a link when it extracts the
			// source; refusing here says so before anything is pushed.
			return fmt.Errorf("%s is a symbolic link to %s, outside the pushed directory: replace it with what it points to, or list it in .devloopignore", rel, link)
		}
	}
	hdr, err := tar.FileInfoHeader(info, link)
	if err != nil {
		return err
	}
	hdr.Name = rel
	if d.IsDir() {
		hdr.Name += "/"
	}
	hdr.ModTime, hdr.AccessTime, hdr.ChangeTime = epoch, epoch, epoch
	hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
	hdr.Format = tar.FormatPAX
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(tw, f)
	return err
}

// PushArtifact pushes img to ref (repository:tag). Blobs the registry has
// are not uploaded again. A Pusher does the same over one client for many
// pushes, remembering what it pushed.
func PushArtifact(ctx context.Context, img v1.Image, ref string, o PushOptions) error {
	_, err := NewPusher(o, nil).Push(ctx, img, ref)
	return err
}

// RemoteDigest is the digest ref names in the registry, or "" when the tag
// does not exist there yet.
func RemoteDigest(ctx context.Context, ref string, o PushOptions) (string, error) {
	r, err := parsePushRef(ref, o.Insecure)
	if err != nil {
		return "", err
	}
	base := o.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	g := &httpGuard{base: base, insecure: o.Insecure}
	desc, err := remote.Head(r, pushRemoteOptions(ctx, g, o)...)
	var te *transport.Error
	switch {
	case errors.As(err, &te) && te.StatusCode == http.StatusNotFound:
		return "", nil
	case err != nil:
		return "", pushError(g, ref, err)
	}
	return desc.Digest.String(), nil
}

func parsePushRef(ref string, insecure bool) (name.Reference, error) {
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	r, err := name.ParseReference(ref, opts...)
	if err != nil {
		return nil, fmt.Errorf("invalid reference %q: %w", ref, err)
	}
	return r, nil
}

func pushRemoteOptions(ctx context.Context, g *httpGuard, o PushOptions) []remote.Option {
	opts := []remote.Option{remote.WithContext(ctx), remote.WithTransport(g)}
	if o.Keychain != nil {
		opts = append(opts, remote.WithAuthFromKeychain(o.Keychain))
	}
	return opts
}

// pushError says what to do about a refused plain-HTTP request or denied
// credentials; other errors pass through.
func pushError(g *httpGuard, ref string, err error) error {
	if g.refused.Load() {
		return fmt.Errorf("%s: the registry was reached over plain HTTP, which is used only when the source says insecure: true: %w", ref, err)
	}
	var te *transport.Error
	if errors.As(err, &te) && (te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden) {
		return fmt.Errorf("%s: access denied (HTTP %d): log in to the registry (credentials come from your docker config, e.g. `docker login` or `crane auth login`): %w", ref, te.StatusCode, err)
	}
	return fmt.Errorf("%s: %w", ref, err)
}
