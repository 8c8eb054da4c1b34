package main

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/internal/testenv"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// The metrics name every tenant's environments: served over HTTPS, to a
// caller bound to the chart's metrics-reader ClusterRole only, the
// manager running under exactly the chart's ClusterRole (which must let
// it review tokens and access).
func TestMetricsNeedAuthorization(t *testing.T) {
	admin, operator := apiServer(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, admin, "metrics-")
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "metrics_reader_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(data, role); err != nil {
		t.Fatal(err)
	}
	role.Name = ns + "-metrics-reader"
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "prometheus"}},
	}
	for _, sa := range []string{"prometheus", "tenant"} {
		if err := admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := admin.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	if err := admin.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(apiEnv.Config)
	if err != nil {
		t.Fatal(err)
	}
	token := func(sa string) string {
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authnv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	prometheus, tenant := token("prometheus"), token("tenant")

	addr := freeAddr(t)
	startManager(t, operator, "--metrics-bind-address="+addr)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(bearer string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		return resp.StatusCode, string(body)
	}
	// The server starts with the manager: wait until it answers at all.
	deadline := time.Now().Add(30 * time.Second)
	code, body := get(prometheus)
	for code == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		code, body = get(prometheus)
	}
	if code != http.StatusOK || !strings.Contains(body, "controller_runtime_") {
		t.Fatalf("the metrics-reader: %d %.200s", code, body)
	}
	if code, body := get(""); code != http.StatusUnauthorized {
		t.Errorf("no token: %d %.200s, want 401", code, body)
	}
	if code, body := get(tenant); code != http.StatusForbidden {
		t.Errorf("a tenant's ServiceAccount: %d %.200s, want 403", code, body)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP answered 200")
		}
	}
}
