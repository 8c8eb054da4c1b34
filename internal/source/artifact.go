package source

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// FluxGroup is the API group of Flux source-controller objects.
const FluxGroup = "source.toolkit.fluxcd.io"

// fluxVersions lists, newest first, the API versions a Flux kind is read
// at: v1 is current, v1beta2 is what Flux releases before v2.3 (and
// OCIRepository before v2.6) serve.
var fluxVersions = map[string][]string{
	"GitRepository": {"v1", "v1beta2"},
	"OCIRepository": {"v1", "v1beta2"},
	"Bucket":        {"v1", "v1beta2"},
}

func (f *Fetcher) resolveFlux(ctx context.Context, namespace string, src v1alpha1.Source) (Ref, error) {
	sr := src.SourceRef
	ns := sr.Namespace
	if ns == "" {
		ns = namespace
	}
	s := subject{src.Name, sr.Kind, ns + "/" + sr.Name}
	versions, ok := fluxVersions[sr.Kind]
	if !ok {
		return Ref{}, s.permanent("unsupported kind: use GitRepository, OCIRepository or Bucket")
	}
	if f.Reader == nil {
		return Ref{}, fmt.Errorf("%s: no client to read Flux sources", s)
	}

	var (
		obj                *unstructured.Unstructured
		notFound, otherErr error
		noMatch            = 0
	)
	for _, v := range versions {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: FluxGroup, Version: v, Kind: sr.Kind})
		err := f.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: sr.Name}, u)
		switch {
		case err == nil:
			obj = u
		case meta.IsNoMatchError(err):
			// The cluster does not serve this version: try an older one.
			noMatch++
			continue
		case apierrors.IsNotFound(err):
			// Also tried at the older version: a cache-backed or fake
			// reader answers NotFound, not NoMatch, for a version it
			// does not serve.
			notFound = err
			continue
		default:
			otherErr = err
		}
		break
	}
	if obj == nil {
		switch {
		case otherErr != nil && apierrors.IsForbidden(otherErr):
			return Ref{}, s.permanent("reading it is forbidden: %v", otherErr)
		case otherErr != nil:
			return Ref{}, s.wrap(otherErr)
		case notFound != nil:
			return Ref{}, s.permanent("not found")
		case noMatch == len(versions):
			return Ref{}, s.permanent("the cluster does not serve %s kind %s: is Flux source-controller installed?", FluxGroup, sr.Kind)
		}
		return Ref{}, s.permanent("not found")
	}

	url, _, _ := unstructured.NestedString(obj.Object, "status", "artifact", "url")
	revision, _, _ := unstructured.NestedString(obj.Object, "status", "artifact", "revision")
	digest, _, _ := unstructured.NestedString(obj.Object, "status", "artifact", "digest")
	if digest == "" {
		// Flux before v2.0 published a bare SHA-256 as checksum.
		if sum, _, _ := unstructured.NestedString(obj.Object, "status", "artifact", "checksum"); sum != "" {
			digest = "sha256:" + sum
		}
	}
	ready, reason, message := readyCondition(obj)
	switch {
	case ready == "False":
		return Ref{}, s.unavailable("not Ready (%s): %s", reason, message)
	case url == "":
		return Ref{}, s.unavailable("has no artifact yet")
	}
	// Ready Unknown with an artifact is Flux reconciling: it keeps serving
	// the last artifact meanwhile, as kustomize-controller relies on, so
	// the artifact is used rather than failing every interval.
	if _, err := newDigester(digest); err != nil {
		return Ref{}, s.permanent("artifact digest %q: %v", digest, err)
	}
	ref := Ref{Source: src.Name, Kind: KindArtifact, URL: url, Revision: revision, Digest: digest}
	ref.ID = digest[strings.IndexByte(digest, ':')+1:]
	if sr.Kind == "GitRepository" {
		if c := commitOf(revision); c != "" {
			ref.ID = c
		}
	}
	return ref, nil
}

// readyCondition returns the Ready condition's status, reason and message.
func readyCondition(obj *unstructured.Unstructured) (status, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Ready" {
			continue
		}
		status, _ = m["status"].(string)
		reason, _ = m["reason"].(string)
		message, _ = m["message"].(string)
		return status, reason, message
	}
	return "", "", ""
}

// commitOf extracts the commit from a Flux git revision: "main@sha1:<sha>",
// "sha1:<sha>", or the pre-v2.0 "main/<sha>".
func commitOf(revision string) string {
	if i := strings.LastIndex(revision, "sha1:"); i >= 0 {
		return revision[i+len("sha1:"):]
	}
	if i := strings.LastIndexByte(revision, '/'); i >= 0 && commitPattern.MatchString(revision[i+1:]) {
		return revision[i+1:]
	}
	if commitPattern.MatchString(revision) {
		return revision
	}
	return ""
}

// digester checks content against "<algorithm>:<hex>". Flux can be told to
// use sha384 or sha512 (--artifact-digest-algo); each is verified with its
// own algorithm.
type digester struct {
	algo, want string
	h          hash.Hash
}

func newDigester(digest string) (*digester, error) {
	algo, hexPart, ok := strings.Cut(digest, ":")
	if !ok {
		return nil, errors.New("not of the form <algorithm>:<hex>")
	}
	var h hash.Hash
	switch algo {
	case "sha256":
		h = sha256.New()
	case "sha384":
		h = sha512.New384()
	case "sha512":
		h = sha512.New()
	default:
		return nil, fmt.Errorf("unsupported algorithm %q", algo)
	}
	if len(hexPart) != 2*h.Size() || strings.ToLower(hexPart) != hexPart {
		return nil, errors.New("malformed hex")
	}
	if _, err := hex.DecodeString(hexPart); err != nil {
		return nil, errors.New("malformed hex")
	}
	return &digester{algo: algo, want: hexPart, h: h}, nil
}

func (d *digester) got() string { return d.algo + ":" + hex.EncodeToString(d.h.Sum(nil)) }
func (d *digester) ok() bool    { return hex.EncodeToString(d.h.Sum(nil)) == d.want }

func (f *Fetcher) fetchArtifact(s subject, ref Ref) filler {
	return func(ctx context.Context, content, scratch string) (entryMeta, error) {
		d, err := newDigester(ref.Digest)
		if err != nil {
			return entryMeta{}, s.permanent("digest %q: %v", ref.Digest, err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, ref.URL, nil)
		if err != nil {
			return entryMeta{}, s.permanent("invalid URL: %v", err)
		}
		resp, err := f.httpClient().Do(req)
		if err != nil {
			return entryMeta{}, s.wrap(err)
		}
		defer func() { _ = resp.Body.Close() }()
		switch {
		case resp.StatusCode == http.StatusOK:
		case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
			// Flux garbage-collects superseded artifacts: the next resolve
			// sees the new one, so this is worth a retry, not a stall.
			return entryMeta{}, s.unavailable("artifact is gone (HTTP %d), probably superseded by a newer revision", resp.StatusCode)
		case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
			return entryMeta{}, s.unavailable("server answered HTTP %d", resp.StatusCode)
		default:
			return entryMeta{}, s.permanent("server answered HTTP %d", resp.StatusCode)
		}
		limit := f.maxSize()
		if resp.ContentLength > limit {
			return entryMeta{}, s.wrap(tooLarge(limit))
		}

		// Download to scratch and verify before extracting: nothing
		// unverified is ever unpacked.
		path := filepath.Join(scratch, "artifact")
		out, err := os.Create(path)
		if err != nil {
			return entryMeta{}, err
		}
		n, err := io.Copy(io.MultiWriter(out, d.h), io.LimitReader(resp.Body, limit+1))
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return entryMeta{}, s.wrap(fmt.Errorf("downloading: %w", err))
		}
		if n > limit {
			return entryMeta{}, s.wrap(tooLarge(limit))
		}
		if !d.ok() {
			return entryMeta{}, s.permanent("digest mismatch: expected %s, downloaded %s", ref.Digest, d.got())
		}
		in, err := os.Open(path)
		if err != nil {
			return entryMeta{}, err
		}
		defer func() { _ = in.Close() }()
		if err := ExtractTar(in, content, limit); err != nil {
			return entryMeta{}, s.wrap(err)
		}
		return entryMeta{Digest: ref.Digest}, nil
	}
}
