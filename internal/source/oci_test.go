package source

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// fluxLayer is the media type `flux push artifact` writes.
const fluxLayer types.MediaType = "application/vnd.cncf.flux.content.v1.tar+gzip"

// pushArtifact writes an artifact of the given layers (tar bytes, gzip or
// not) to repo:tags on the registry at host, and returns its digest.
func pushArtifact(t *testing.T, host, repo string, layers [][]byte, tags ...string) string {
	t.Helper()
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, "application/vnd.cncf.flux.config.v1+json")
	for _, l := range layers {
		mt := types.OCIUncompressedLayer
		if len(l) > 1 && l[0] == 0x1f && l[1] == 0x8b {
			mt = fluxLayer
		}
		var err error
		img, err = mutate.AppendLayers(img, static.NewLayer(l, mt))
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, tag := range tags {
		ref, err := name.ParseReference(host + "/" + repo + ":" + tag)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(ref, img); err != nil {
			t.Fatal(err)
		}
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

func hostOf(srv *httptest.Server) string { return strings.TrimPrefix(srv.URL, "http://") }

// fetchWithCredentials fetches ref with the credentials src names in the
// test namespace, read as the operator reads them.
func fetchWithCredentials(t *testing.T, f *Fetcher, ref Ref, src v1alpha1.Source) *Artifact {
	t.Helper()
	ctx := context.Background()
	creds, err := LoadCredentials(ctx, f.Reader, testNamespace, src)
	if err != nil {
		t.Fatal(err)
	}
	a, err := f.Fetch(ctx, ref, creds)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// privateRegistry is one registry behind two doors, both plain HTTP: open
// takes pushes without credentials, guarded answers only user:password
// and says "authentication required" in a registry's words otherwise.
func privateRegistry(t *testing.T, user, password string, seen ...func(*http.Request)) (open, guarded string) {
	t.Helper()
	inner := registry.New()
	openSrv := httptest.NewServer(inner)
	t.Cleanup(openSrv.Close)
	guardedSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, f := range seen {
			f(r)
		}
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="registry"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(guardedSrv.Close)
	return hostOf(openSrv), hostOf(guardedSrv)
}

func ociSource(repo, tag, digest string, insecure bool) v1alpha1.Source {
	return v1alpha1.Source{Name: "local", OCI: &v1alpha1.OCISource{Repository: repo, Tag: tag, Digest: digest, Insecure: insecure}}
}

type ociRegistry struct {
	srv      *httptest.Server
	requests *counting
	host     string
	repo     string
	digest   string
}

func newOCIRegistry(t *testing.T, layers ...[]byte) *ociRegistry {
	t.Helper()
	c := &counting{h: registry.New()}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	r := &ociRegistry{srv: srv, requests: c, host: hostOf(srv)}
	r.repo = r.host + "/team-a/src/app"
	r.digest = pushArtifact(t, r.host, "team-a/src/app", layers, "dev", "latest")
	return r
}

func TestOCIResolve(t *testing.T) {
	reg := newOCIRegistry(t, gzipped(t, tarOf(t, tfile("a.txt", "a"))))
	hex := strings.TrimPrefix(reg.digest, "sha256:")
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	}))
	defer down.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()

	tests := []struct {
		name   string
		src    v1alpha1.Source
		want   Ref
		noHTTP bool
		class  errorClass
		errors []string
	}{
		{name: "tag", src: ociSource(reg.repo, "dev", "", true),
			want: Ref{Source: "local", Kind: KindOCI, URL: reg.repo, Revision: "dev@" + reg.digest, ID: hex, Digest: reg.digest, Insecure: true}},
		{name: "no tag means latest", src: ociSource(reg.repo, "", "", true),
			want: Ref{Source: "local", Kind: KindOCI, URL: reg.repo, Revision: "latest@" + reg.digest, ID: hex, Digest: reg.digest, Insecure: true}},
		{name: "digest resolves to itself without network", src: ociSource(reg.repo, "", reg.digest, true), noHTTP: true,
			want: Ref{Source: "local", Kind: KindOCI, URL: reg.repo, Revision: reg.digest, ID: hex, Digest: reg.digest, Insecure: true}},
		{name: "unknown tag", src: ociSource(reg.repo, "nope", "", true), class: permanent,
			errors: []string{`source "local": oci ` + reg.repo, `tag "nope" not found`}},
		{name: "plain HTTP without insecure", src: ociSource(reg.repo, "dev", "", false), class: permanent,
			errors: []string{`source "local": oci ` + reg.repo, "insecure: true"}},
		{name: "registry answers 503", src: ociSource(hostOf(down)+"/x/y", "dev", "", true), class: unavailable,
			errors: []string{`source "local": oci ` + hostOf(down) + "/x/y", "503"}},
		{name: "connection refused", src: ociSource(hostOf(closed)+"/x/y", "dev", "", true), class: unavailable,
			errors: []string{`source "local": oci ` + hostOf(closed) + "/x/y", "connection refused"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := reg.requests.n.Load()
			ref, err := newFetcher(t).Resolve(context.Background(), testNamespace, tt.src)
			if !expectResolved(t, ref, err, tt.class, tt.errors, tt.want) {
				return
			}
			if n := reg.requests.n.Load() - before; tt.noHTTP && n != 0 {
				t.Errorf("made %d requests", n)
			}
		})
	}
}

func TestOCIFetch(t *testing.T) {
	reg := newOCIRegistry(t,
		gzipped(t, tarOf(t, tfile("a.txt", "layer 1"), tfile("b.txt", "b"), tfile("gone.txt", "x"))),
		tarOf(t, tfile("a.txt", "layer 2"), tfile(".wh.gone.txt", ""), tsymlink("c", "b.txt")),
	)
	ctx := context.Background()
	f := newFetcher(t)
	ref, err := f.Resolve(ctx, testNamespace, ociSource(reg.repo, "dev", "", true))
	if err != nil {
		t.Fatal(err)
	}
	a, err := f.Fetch(ctx, ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Digest != reg.digest || a.ID != strings.TrimPrefix(reg.digest, "sha256:") {
		t.Errorf("artifact %+v, want digest %s", a.Ref, reg.digest)
	}
	for file, want := range map[string]string{"a.txt": "layer 2", "b.txt": "b", "c": "b"} {
		if got := readFile(t, filepath.Join(a.Dir, file)); got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(a.Dir, "gone.txt")); err == nil {
		t.Errorf("gone.txt survived its whiteout")
	}

	t.Run("plain HTTP without insecure", func(t *testing.T) {
		insecure := ref
		insecure.Insecure = false
		_, err := newFetcher(t).Fetch(ctx, insecure, nil)
		expectError(t, err, permanent, []string{`source "local": oci ` + reg.repo, "insecure: true"})
	})
	t.Run("over max size", func(t *testing.T) {
		small := newFetcher(t)
		small.MaxSize = 10
		_, err := small.Fetch(ctx, ref, nil)
		expectError(t, err, permanent, []string{`source "local": oci`, "maximum size of 10"})
	})
	t.Run("unknown digest", func(t *testing.T) {
		missing := ref
		missing.Digest = "sha256:" + strings.Repeat("a", 64)
		_, err := newFetcher(t).Fetch(ctx, missing, nil)
		expectError(t, err, permanent, []string{"not found"})
	})
	t.Run("unsafe layer", func(t *testing.T) {
		d := pushArtifact(t, reg.host, "team-a/src/evil", [][]byte{tarOf(t, tfile("../../x", "evil"))}, "dev")
		evil := Ref{Source: "local", Kind: KindOCI, URL: reg.host + "/team-a/src/evil", Digest: d, Insecure: true}
		_, err := newFetcher(t).Fetch(ctx, evil, nil)
		expectError(t, err, permanent, []string{"layer 0", "points outside"})
	})
	t.Run("image index", func(t *testing.T) {
		img, err := remote.Image(mustRef(t, reg.repo+":dev"))
		if err != nil {
			t.Fatal(err)
		}
		idx := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: img})
		ir := mustRef(t, reg.host+"/team-a/src/index:dev")
		if err := remote.WriteIndex(ir, idx); err != nil {
			t.Fatal(err)
		}
		d, _ := idx.Digest()
		_, err = newFetcher(t).Fetch(ctx, Ref{Source: "local", Kind: KindOCI, URL: reg.host + "/team-a/src/index", Digest: d.String(), Insecure: true}, nil)
		expectError(t, err, permanent, []string{"image index"})
	})
	t.Run("unchanged digest is served from the store without network", func(t *testing.T) {
		reg.srv.Close()
		again, err := f.Fetch(ctx, ref, nil)
		if err != nil {
			t.Fatal(err)
		}
		if again.Dir != a.Dir {
			t.Errorf("dir %s, want the stored %s", again.Dir, a.Dir)
		}
	})
}

func mustRef(t *testing.T, s string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestOCIRegistryAuth(t *testing.T) {
	const user, password = "puller", "reg-Pa55word"
	open, guarded := privateRegistry(t, user, password)
	digest := pushArtifact(t, open, "team-a/private", [][]byte{tarOf(t, tfile("secret.txt", "content"))}, "dev")
	repo := guarded + "/team-a/private"

	dockerConfig := func(pw string) string {
		auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pw))
		return fmt.Sprintf(`{"auths":{"http://%s":{"auth":%q}}}`, guarded, auth)
	}
	f := newFetcher(t,
		secret("regcred", map[string]string{".dockerconfigjson": dockerConfig(password)}),
		secret("wrong", map[string]string{".dockerconfigjson": dockerConfig("nope-Pa55")}),
		secret("empty", map[string]string{"username": "x"}),
	)
	src := func(secretName string) v1alpha1.Source {
		return withSecret(ociSource(repo, "dev", "", true), secretName)
	}
	ctx := context.Background()

	t.Run("resolve and fetch with a dockerconfigjson secret", func(t *testing.T) {
		ref, err := f.Resolve(ctx, testNamespace, src("regcred"))
		if err != nil {
			t.Fatal(err)
		}
		if ref.Digest != digest {
			t.Errorf("digest %s, want %s", ref.Digest, digest)
		}
		a := fetchWithCredentials(t, f, ref, src("regcred"))
		if got := readFile(t, filepath.Join(a.Dir, "secret.txt")); got != "content" {
			t.Errorf("secret.txt = %q", got)
		}
	})
	for _, tt := range []struct {
		name, secret string
		want         []string
	}{
		{"no credentials", "", []string{`tag "dev"`, "authentication required"}},
		{"wrong password", "wrong", []string{`tag "dev"`, "authentication required or credentials rejected"}},
		{"secret without .dockerconfigjson", "empty", []string{`secret "empty"`, `missing key ".dockerconfigjson"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.Resolve(ctx, testNamespace, src(tt.secret))
			expectError(t, err, permanent, append([]string{`source "local": oci ` + repo}, tt.want...), password, "nope-Pa55")
		})
	}
}

var _ v1.Image = empty.Image
