package helm

import (
	"context"
	"encoding/base64"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/registry"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/testregistry/chartrepo"
)

func TestPrefixMatches(t *testing.T) {
	for _, tc := range []struct {
		url, prefix string
		want        bool
	}{
		{"https://a.example/charts/index.yaml", "https://a.example", true},
		{"https://a.example", "https://a.example", true},
		{"https://a.example/charts/index.yaml", "https://a.example/", true},
		{"https://a.example/charts/index.yaml", "https://a.example/charts", true},
		{"https://a.example.evil/charts/index.yaml", "https://a.example", false},
		{"https://a.example:8443/charts", "https://a.example", false},
		{"https://a.example@evil.example/charts", "https://a.example", false},
		{"https://a.example/chartsmore/index.yaml", "https://a.example/charts", false},
		{"http://a.example/charts", "https://a.example", false},
		{"oci://r.example/team/app", "oci://r.example/team", true},
		{"oci://r.example/teammate/app", "oci://r.example/team", false},
		{"https://a.example/x", "", false},
	} {
		if got := prefixMatches(tc.url, tc.prefix); got != tc.want {
			t.Errorf("prefixMatches(%q, %q) = %v, want %v", tc.url, tc.prefix, got, tc.want)
		}
	}
}

func secretObj(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func dockerConfigFor(host, user, password string) string {
	return `{"auths": {"https://` + host + `/v1/": {"auth": "` + base64.StdEncoding.EncodeToString([]byte(user+":"+password)) + `"}}}`
}

// TestChartCredentialsForRepositories: an umbrella chart in a repository
// that requires basic auth, with a dependency in the same repository and
// an archive the index places on another host. Credentials go with every
// request whose URL starts with the prefix (index, archives, either Secret
// form) and with no other; Secret problems name the spec field.
func TestChartCredentialsForRepositories(t *testing.T) {
	r := chartrepo.Start(t)
	r.RequireBasicAuth("reader", "s3cret-Pa55")
	cdn := chartrepo.Start(t)
	r.AddFiles(t, configMapChart("platform", "1.0.0", "dependencies:\n- name: nats\n  version: 1.x\n  repository: "+r.URL+"\n- name: etcd\n  version: 0.3.0\n  repository: "+r.URL+"\n"))
	r.AddFiles(t, configMapChart("nats", "1.2.3", ""))
	// etcd's archive is on the CDN, which must not receive the credentials.
	etcd := chartrepo.PackageFiles(t, configMapChart("etcd", "0.3.0", ""))
	cdn.Add(t, etcd)
	r.AddLink(t, etcd, cdn.URL+"/etcd-0.3.0.tgz")
	host := strings.TrimPrefix(r.Server.URL, "http://")

	cl := fake.NewClientBuilder().WithObjects(
		secretObj("basic", map[string]string{"username": "reader", "password": "s3cret-Pa55"}),
		secretObj("docker", map[string]string{corev1.DockerConfigJsonKey: dockerConfigFor(host, "reader", "s3cret-Pa55")}),
		secretObj("docker-other", map[string]string{corev1.DockerConfigJsonKey: dockerConfigFor("elsewhere.example", "reader", "s3cret-Pa55")}),
		secretObj("half", map[string]string{"username": "reader"}),
		secretObj("wrong", map[string]string{"username": "reader", "password": "nope"}),
	).Build()
	ref := v1alpha1.ChartRef{Repo: r.URL, Name: "platform"}
	load := func(entries ...v1alpha1.ChartCredentials) error {
		l := &ChartLoader{CacheDir: t.TempDir()}
		_, err := l.Load(context.Background(), ref, nil, LoadOptions{Credentials: &ChartCredentials{Entries: entries, Namespace: "team", Reader: cl}})
		return err
	}
	entry := func(prefix, secret string) v1alpha1.ChartCredentials {
		return v1alpha1.ChartCredentials{URLPrefix: prefix, SecretRef: v1alpha1.LocalObjectReference{Name: secret}}
	}

	for _, tc := range []struct {
		name    string
		entries []v1alpha1.ChartCredentials
		want    []string // substrings of the error; none: it loads
	}{
		{name: "basic auth, prefix is the repository", entries: []v1alpha1.ChartCredentials{entry(r.URL, "basic")}},
		{name: "docker config, prefix is the host", entries: []v1alpha1.ChartCredentials{entry(r.Server.URL, "docker")}},
		{name: "the longest prefix wins", entries: []v1alpha1.ChartCredentials{entry(r.Server.URL, "wrong"), entry(r.URL+"/", "basic")}},
		{name: "no credentials", want: []string{"chart repository " + r.URL + ": chart platform: index: GET " + r.URL + "/index.yaml: 401 Unauthorized"}},
		{name: "a prefix of another path", entries: []v1alpha1.ChartCredentials{entry(r.Server.URL+"/chart", "basic")}, want: []string{"401 Unauthorized"}},
		{name: "a prefix without the port", entries: []v1alpha1.ChartCredentials{entry("http://127.0.0.1", "basic")}, want: []string{"401 Unauthorized"}},
		{name: "missing Secret", entries: []v1alpha1.ChartCredentials{entry(r.URL, "nope")},
			want: []string{`spec.chartCredentials[0].secretRef: Secret "nope" not found in namespace "team"`}},
		{name: "Secret with half the keys", entries: []v1alpha1.ChartCredentials{entry("https://elsewhere.example", "basic"), entry(r.URL, "half")},
			want: []string{`spec.chartCredentials[1].secretRef: Secret "half": has one of the keys username and password but not the other`}},
		{name: "docker config without the host", entries: []v1alpha1.ChartCredentials{entry(r.URL, "docker-other")},
			want: []string{`spec.chartCredentials[0].secretRef: Secret "docker-other": its docker config has no entry for ` + host}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r.ForgetAuth()
			cdn.ForgetAuth()
			err := load(tc.entries...)
			if len(tc.want) == 0 {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(r.AuthSeen()).NotTo(ContainElement(""), "every request to the repository carried the credentials")
			} else {
				g.Expect(fault.IsPermanent(err)).To(BeTrue(), "%v", err)
				for _, w := range tc.want {
					g.Expect(err.Error()).To(ContainSubstring(w))
				}
				g.Expect(err.Error()).NotTo(ContainSubstring("s3cret"))
			}
			for _, h := range cdn.AuthSeen() {
				g.Expect(h).To(BeEmpty(), "the CDN got no credentials")
			}
		})
	}

	g := NewWithT(t)
	forbidden := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "basic", nil)
		},
	}).Build()
	l := &ChartLoader{CacheDir: t.TempDir()}
	_, err := l.Load(context.Background(), ref, nil, LoadOptions{Credentials: &ChartCredentials{
		Entries: []v1alpha1.ChartCredentials{entry(r.URL, "basic")}, Namespace: "team", Reader: forbidden}})
	g.Expect(fault.IsPermanent(err)).To(BeTrue())
	g.Expect(err).To(MatchError(ContainSubstring(`spec.chartCredentials[0].secretRef: the environment's ServiceAccount may not read Secret "basic"`)))
}

// TestChartCredentialsForRegistries: an OCI chart and its OCI dependency
// in a registry that requires basic auth; the credentials go to that
// registry's host only, for references under the prefix.
func TestChartCredentialsForRegistries(t *testing.T) {
	g := NewWithT(t)
	inner := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if u, p, ok := req.BasicAuth(); !ok || u != "pusher" || p != "s3cret-Pa55" {
			w.Header().Set("WWW-Authenticate", `Basic realm="registry"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, req)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, files := range []map[string]string{
		configMapChart("etcd", "0.3.1", ""),
		configMapChart("platform", "1.0.0", "dependencies:\n- name: etcd\n  version: 0.3.x\n  repository: oci://"+host+"/team/charts\n"),
	} {
		chartrepo.PushOCI(t, chartrepo.PackageFiles(t, files), host+"/team/charts", registry.ClientOptBasicAuth("pusher", "s3cret-Pa55"))
	}
	cl := fake.NewClientBuilder().WithObjects(
		secretObj("regcred", map[string]string{corev1.DockerConfigJsonKey: dockerConfigFor(host, "pusher", "s3cret-Pa55")}),
	).Build()
	load := func(prefix string) error {
		opts := plainHTTPTo(host)
		opts.Credentials = &ChartCredentials{Namespace: "team", Reader: cl,
			Entries: []v1alpha1.ChartCredentials{{URLPrefix: prefix, SecretRef: v1alpha1.LocalObjectReference{Name: "regcred"}}}}
		l := &ChartLoader{CacheDir: t.TempDir()}
		_, err := l.Load(context.Background(), v1alpha1.ChartRef{OCI: "oci://" + host + "/team/charts/platform", Version: "1.0.0"}, nil, opts)
		return err
	}
	g.Expect(load("oci://" + host + "/team")).To(Succeed())
	err := load("oci://" + host + "/tea")
	g.Expect(err).To(HaveOccurred(), "a prefix ends at a path boundary")
	g.Expect(err.Error()).NotTo(ContainSubstring("s3cret"))
}
