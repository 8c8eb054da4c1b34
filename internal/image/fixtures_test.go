package image

import (
	"io"
	"log"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// startRegistry serves go-containerregistry's in-memory registry over
// plain HTTP on 127.0.0.1, behind wrap when given (a failing fake), and
// returns its host.
func startRegistry(t testing.TB, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	var h http.Handler = registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// fastRetries makes go-containerregistry give up on a failing registry in
// milliseconds instead of seconds.
func fastRetries() Option {
	return func(o *options) {
		o.retryBackoff = &remote.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 2}
	}
}

// request is one request a recordingTransport saw.
type request struct {
	Method, Scheme, Path, Query string
	Status                      int
}

func (r request) String() string { return r.Method + " " + r.Path }

// recordingTransport records every request that reaches it.
type recordingTransport struct {
	mu   sync.Mutex
	reqs []request
}

func (rt *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	r := request{Method: req.Method, Scheme: req.URL.Scheme, Path: req.URL.Path, Query: req.URL.RawQuery}
	if err == nil {
		r.Status = resp.StatusCode
	}
	rt.mu.Lock()
	rt.reqs = append(rt.reqs, r)
	rt.mu.Unlock()
	return resp, err
}

// take returns the recorded requests and forgets them.
func (rt *recordingTransport) take() []request {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	out := rt.reqs
	rt.reqs = nil
	return out
}

// blobUploads are the requests of blob uploads (POST, PATCH and PUT under
// /blobs/uploads/).
func blobUploads(reqs []request) []request {
	var out []request
	for _, r := range reqs {
		if strings.Contains(r.Path, "/blobs/uploads/") && (r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch) {
			out = append(out, r)
		}
	}
	return out
}

// writes are the requests that change the registry.
func writes(reqs []request) []request {
	var out []request
	for _, r := range reqs {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			out = append(out, r)
		}
	}
	return out
}

// uploadedDigests are the digests of the completed blob uploads.
func uploadedDigests(reqs []request) []string {
	var out []string
	for _, r := range blobUploads(reqs) {
		if r.Method == http.MethodPut && r.Status == http.StatusCreated {
			for _, kv := range strings.Split(r.Query, "&") {
				if d, ok := strings.CutPrefix(kv, "digest="); ok {
					out = append(out, strings.ReplaceAll(d, "%3A", ":"))
				}
			}
		}
	}
	return out
}

// randomBytes returns n bytes of a fixed-seed generator.
func randomBytes(seed int64, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

// pushBase pushes a small random base image to host/<repo>:latest: an
// image for one platform, an index for several. It returns the reference.
func pushBase(t testing.TB, host, repo string, platforms ...string) string {
	t.Helper()
	ref, err := name.ParseReference(host+"/"+repo+":latest", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	var images []platformImage
	for _, s := range platforms {
		p, err := v1.ParsePlatform(s)
		if err != nil {
			t.Fatal(err)
		}
		img, err := random.Image(512, 2)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		cfg := cf.DeepCopy()
		cfg.OS, cfg.Architecture, cfg.Variant = p.OS, p.Architecture, p.Variant
		cfg.Config.Env = []string{"PATH=/usr/bin", "BASE=1"}
		cfg.Config.Cmd = []string{"/base-cmd"}
		if img, err = mutate.ConfigFile(img, cfg); err != nil {
			t.Fatal(err)
		}
		images = append(images, platformImage{platform: *p, image: img})
	}
	if len(images) == 1 {
		if err := remote.Write(ref, images[0].image); err != nil {
			t.Fatal(err)
		}
		return ref.String()
	}
	idx := v1.ImageIndex(empty.Index)
	for _, pi := range images {
		p := pi.platform
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: pi.image, Descriptor: v1.Descriptor{Platform: &p}})
	}
	idx = mutate.IndexMediaType(idx, types.OCIImageIndex)
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatal(err)
	}
	return ref.String()
}

// tagDigest returns the digest host/<repo>:<tag> names, or "" if none.
func tagDigest(t testing.TB, host, repo, tag string) string {
	t.Helper()
	ref, err := name.ParseReference(host+"/"+repo+":"+tag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Head(ref)
	if err != nil {
		return ""
	}
	return desc.Digest.String()
}

// staticTags renders the same tags for every build.
func staticTags(tags ...string) func(string) ([]string, error) {
	return func(string) ([]string, error) { return tags, nil }
}
