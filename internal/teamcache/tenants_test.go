package teamcache

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr/testr"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/test/builder"
)

// tenantEnv is one environment in a namespace of its own, acting as its
// ServiceAccount "builder", with one builder pod running as it.
type tenantEnv struct {
	env    *v1alpha1.DevEnvironment
	pod    *corev1.Pod
	client *Client
}

// newTenantEnv makes the namespace, the ServiceAccount, the environment
// (reading readFrom), a pod labelled with the environment running as that
// ServiceAccount (envtest has no kubelet: the pod only exists, which is
// all a bound token needs), and the pod's token for the cache's audience,
// in a file for a Client of srv.
func newTenantEnv(t *testing.T, prefix string, srv *httptest.Server, readFrom ...v1alpha1.CacheSource) tenantEnv {
	t.Helper()
	return newTenantEnvAt(t, prefix, srv.URL, nil, readFrom...)
}

// newTenantEnvAt is newTenantEnv for a service at url, reached with hc.
func newTenantEnvAt(t *testing.T, prefix, url string, hc *http.Client, readFrom ...v1alpha1.CacheSource) tenantEnv {
	t.Helper()
	ctx := context.Background()
	ns := testenv.Namespace(t, admin, prefix)
	const sa = "builder"
	createServiceAccount(t, ns, sa)
	env := builder.Env(ns, "dev").ServiceAccount(sa).Obj()
	if len(readFrom) > 0 {
		env.Spec.Cache = &v1alpha1.EnvironmentCache{ReadFrom: readFrom}
	}
	if err := admin.Create(ctx, env); err != nil {
		t.Fatal(err)
	}
	pod := builderPod(t, ns, env.Name, sa)
	return tenantEnv{env: env, pod: pod, client: &Client{URL: url, HTTP: hc, TokenFile: podToken(t, pod, DefaultAudience)}}
}

func builderPod(t *testing.T, ns, envName, sa string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "builder-", Labels: map[string]string{v1alpha1.LabelEnvironment: envName}},
		Spec: corev1.PodSpec{
			ServiceAccountName: sa, AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "build", Image: "golang"}},
		},
	}
	if err := admin.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// podToken is a TokenRequest bound to pod, as a projected volume gets it,
// written to a file.
func podToken(t *testing.T, pod *corev1.Pod, audience string) string {
	t.Helper()
	tr, err := adminSet.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(context.Background(), pod.Spec.ServiceAccountName, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{
			Audiences:      []string{audience},
			BoundObjectRef: &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	f := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(f, []byte(tr.Status.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// grantReadCache lets reader's ServiceAccount read the build cache of
// target's DevEnvironment (the verb readcache on it, as
// docs/team-cache.md shows).
func grantReadCache(t *testing.T, target, reader tenantEnv) {
	t.Helper()
	ctx := context.Background()
	ns := target.env.Namespace
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "read-cache-"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"devenvironments"},
			ResourceNames: []string{target.env.Name}, Verbs: []string{VerbReadCache}}},
	}
	if err := admin.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "read-cache-"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: reader.env.Namespace, Name: reader.env.Spec.ServiceAccountName}},
	}
	if err := admin.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
}

// newService is the service as the operator runs it, on a store of its
// own.
func newService(t *testing.T) (*Server, *httptest.Server) {
	t.Helper()
	s := &Server{
		// Large enough for a client-go tree: a bound the build outgrows
		// evicts the entries a reader is about to ask for.
		Store:    &Store{Root: t.TempDir(), MaxBytes: 8 << 30},
		Reviewer: NewKubeReviewer(operatorSet), Reader: operatorReader,
		Audience: DefaultAudience, Log: testr.New(t),
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv
}

func sourceOf(te tenantEnv) v1alpha1.CacheSource {
	return v1alpha1.CacheSource{Namespace: te.env.Namespace, Name: te.env.Name}
}

func createServiceAccount(t *testing.T, ns, name string) {
	t.Helper()
	if err := admin.Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
		t.Fatal(err)
	}
}
