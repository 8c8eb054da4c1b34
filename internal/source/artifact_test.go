package source

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// fluxObject is a Flux source object as source-controller leaves it.
func fluxObject(kind, version, name string, ready string, artifact map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: FluxGroup, Version: version, Kind: kind})
	u.SetNamespace("flux-system")
	u.SetName(name)
	status := map[string]any{}
	if ready != "" {
		status["conditions"] = []any{map[string]any{
			"type": "Ready", "status": ready, "reason": "Testing", "message": "condition under test",
		}}
	}
	if artifact != nil {
		status["artifact"] = artifact
	}
	u.Object["status"] = status
	return u
}

// fluxFetcher is a Fetcher whose client serves the Flux kinds at the given
// versions only, as a cluster with a given Flux release would.
func fluxFetcher(t *testing.T, served map[string][]string, objs ...client.Object) *Fetcher {
	t.Helper()
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Secret"), meta.RESTScopeNamespace)
	for kind, versions := range served {
		for _, v := range versions {
			mapper.Add(schema.GroupVersionKind{Group: FluxGroup, Version: v, Kind: kind}, meta.RESTScopeNamespace)
		}
	}
	// The fake client ignores its mapper on Get; a real client asks it and
	// answers NoMatch for a version the cluster does not serve.
	get := func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		gvk := obj.GetObjectKind().GroupVersionKind()
		if _, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			return err
		}
		return c.Get(ctx, key, obj, opts...)
	}
	return &Fetcher{
		Reader: fake.NewClientBuilder().WithRESTMapper(mapper).WithObjects(objs...).
			WithInterceptorFuncs(interceptor.Funcs{Get: get}).Build(),
		Root: t.TempDir(),
	}
}

func sha256Of(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func fluxSource(kind, name string) v1alpha1.Source {
	return v1alpha1.Source{Name: "flux", SourceRef: &v1alpha1.FluxSourceReference{Kind: kind, Name: name, Namespace: "flux-system"}}
}

func TestFluxResolve(t *testing.T) {
	const commit = "0123456789abcdef0123456789abcdef01234567"
	digest := "sha256:" + strings.Repeat("ab", 32)
	artifact := map[string]any{"url": "http://source-controller/a.tar.gz", "revision": "main@sha1:" + commit, "digest": digest}
	ociArtifact := map[string]any{"url": "http://source-controller/o.tar.gz", "revision": "v1@sha256:" + strings.Repeat("cd", 32), "digest": digest}
	bucketArtifact := map[string]any{"url": "http://source-controller/b.tar.gz", "revision": "sha256:" + strings.Repeat("ef", 32), "digest": digest}
	served := map[string][]string{"GitRepository": {"v1"}, "OCIRepository": {"v1beta2"}, "Bucket": {"v1"}}
	f := fluxFetcher(t, served,
		fluxObject("GitRepository", "v1", "app", "True", artifact),
		fluxObject("GitRepository", "v1", "reconciling", "Unknown", artifact),
		fluxObject("GitRepository", "v1", "failing", "False", artifact),
		fluxObject("GitRepository", "v1", "new", "Unknown", nil),
		fluxObject("GitRepository", "v1", "bad-digest", "True", map[string]any{"url": "http://x/a.tar.gz", "revision": "r", "digest": "md5:abc"}),
		fluxObject("OCIRepository", "v1beta2", "oci", "True", ociArtifact),
		fluxObject("Bucket", "v1", "bucket", "True", bucketArtifact),
	)
	tests := []struct {
		name   string
		src    v1alpha1.Source
		want   Ref
		class  errorClass
		errors []string
	}{
		{name: "GitRepository", src: fluxSource("GitRepository", "app"),
			want: Ref{Source: "flux", Kind: KindArtifact, URL: "http://source-controller/a.tar.gz", Revision: "main@sha1:" + commit, ID: commit, Digest: digest}},
		{name: "reconciling keeps serving its artifact", src: fluxSource("GitRepository", "reconciling"),
			want: Ref{Source: "flux", Kind: KindArtifact, URL: "http://source-controller/a.tar.gz", Revision: "main@sha1:" + commit, ID: commit, Digest: digest}},
		{name: "OCIRepository falls back to v1beta2", src: fluxSource("OCIRepository", "oci"),
			want: Ref{Source: "flux", Kind: KindArtifact, URL: "http://source-controller/o.tar.gz", Revision: ociArtifact["revision"].(string), ID: strings.Repeat("ab", 32), Digest: digest}},
		{name: "Bucket", src: fluxSource("Bucket", "bucket"),
			want: Ref{Source: "flux", Kind: KindArtifact, URL: "http://source-controller/b.tar.gz", Revision: bucketArtifact["revision"].(string), ID: strings.Repeat("ab", 32), Digest: digest}},
		{name: "not Ready", src: fluxSource("GitRepository", "failing"), class: unavailable,
			errors: []string{`source "flux": GitRepository flux-system/failing`, "not Ready", "condition under test"}},
		{name: "no artifact yet", src: fluxSource("GitRepository", "new"), class: unavailable,
			errors: []string{`source "flux": GitRepository flux-system/new`, "no artifact yet"}},
		{name: "missing object", src: fluxSource("GitRepository", "absent"), class: permanent,
			errors: []string{`source "flux": GitRepository flux-system/absent`, "not found"}},
		{name: "kind not served", src: fluxSource("HelmChart", "x"), class: permanent, errors: []string{"unsupported kind"}},
		{name: "unsupported digest", src: fluxSource("GitRepository", "bad-digest"), class: permanent, errors: []string{`"md5:abc"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref, err := f.Resolve(context.Background(), "team-a", tt.src)
			expectResolved(t, ref, err, tt.class, tt.errors, tt.want)
		})
	}

	t.Run("Flux not installed", func(t *testing.T) {
		_, err := fluxFetcher(t, nil).Resolve(context.Background(), "team-a", fluxSource("OCIRepository", "oci"))
		expectError(t, err, permanent, []string{"is Flux source-controller installed?"})
	})
}

func TestFluxFetch(t *testing.T) {
	tgz := gzipped(t, tarOf(t, tfile("deploy/chart/Chart.yaml", "name: app\n"), tfile("README.md", "hi")))
	files := http.NewServeMux()
	files.HandleFunc("/gitrepository/flux-system/app/latest.tar.gz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(tgz) })
	files.HandleFunc("/evil.tar.gz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(gzipped(t, tarOf(t, tfile("/etc/cron.d/x", "evil"))))
	})
	files.HandleFunc("/busy.tar.gz", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "busy", http.StatusBadGateway) })
	requests := &counting{h: files}
	srv := httptest.NewServer(requests)
	defer srv.Close()
	url := srv.URL + "/gitrepository/flux-system/app/latest.tar.gz"
	artifact := map[string]any{"url": url, "revision": "main@sha1:0123456789abcdef0123456789abcdef01234567", "digest": sha256Of(tgz)}
	f := fluxFetcher(t, map[string][]string{"GitRepository": {"v1"}}, fluxObject("GitRepository", "v1", "app", "True", artifact))
	ctx := context.Background()

	ref, err := f.Resolve(ctx, "team-a", fluxSource("GitRepository", "app"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := f.Fetch(ctx, ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(a.Dir, "deploy/chart/Chart.yaml")); got != "name: app\n" {
		t.Errorf("Chart.yaml = %q", got)
	}
	if a.Digest != sha256Of(tgz) {
		t.Errorf("digest %s", a.Digest)
	}

	t.Run("unchanged digest is served from the store without network", func(t *testing.T) {
		before := requests.n.Load()
		again, err := f.Fetch(ctx, ref, nil)
		if err != nil {
			t.Fatal(err)
		}
		if n := requests.n.Load() - before; n != 0 {
			t.Errorf("made %d requests", n)
		}
		if again.Dir != a.Dir {
			t.Errorf("dir %s, want %s", again.Dir, a.Dir)
		}
	})

	sum512 := sha512.Sum512(tgz)
	tests := []struct {
		name    string
		ref     Ref
		maxSize int64
		class   errorClass
		errors  []string
	}{
		{name: "sha512 digest", ref: Ref{URL: url, Digest: "sha512:" + hex.EncodeToString(sum512[:])}},
		{name: "digest mismatch", ref: Ref{URL: url, Digest: sha256Of([]byte("something else"))}, class: permanent,
			errors: []string{`source "flux": artifact ` + url, "digest mismatch", sha256Of(tgz)}},
		{name: "download over max size", ref: Ref{URL: url, Digest: sha256Of(tgz)}, maxSize: 16, class: permanent,
			errors: []string{"maximum size of 16"}},
		{name: "unsafe archive", ref: Ref{URL: srv.URL + "/evil.tar.gz", Digest: sha256Of(gzipped(t, tarOf(t, tfile("/etc/cron.d/x", "evil"))))}, class: permanent,
			errors: []string{"absolute path"}},
		{name: "artifact gone", ref: Ref{URL: srv.URL + "/old.tar.gz", Digest: sha256Of(tgz)}, class: unavailable,
			errors: []string{"HTTP 404", "superseded"}},
		{name: "server error", ref: Ref{URL: srv.URL + "/busy.tar.gz", Digest: sha256Of(tgz)}, class: unavailable,
			errors: []string{"HTTP 502"}},
		{name: "invalid store key", ref: Ref{URL: url, Digest: "sha256:../../etc"}, class: permanent,
			errors: []string{"invalid content key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			other := &Fetcher{Root: t.TempDir(), MaxSize: tt.maxSize}
			tt.ref.Source, tt.ref.Kind = "flux", KindArtifact
			a, err := other.Fetch(ctx, tt.ref, nil)
			if tt.errors != nil {
				expectError(t, err, tt.class, tt.errors)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := readFile(t, filepath.Join(a.Dir, "README.md")); got != "hi" {
				t.Errorf("README.md = %q", got)
			}
		})
	}
}
