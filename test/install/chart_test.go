package install

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/internal/testenv"
)

// everything turns on every optional part of the chart.
func everything() map[string]any {
	return map[string]any{
		"image":          map[string]any{"repository": "10.0.0.1:5000/devloop/manager", "digest": "sha256:" + strings.Repeat("ab", 32)},
		"replicaCount":   2,
		"shards":         []any{"team-a", "team-b"},
		"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}},
		"manager": map[string]any{
			"concurrent": 8, "concurrentPerNamespace": 3, "defaultServiceAccount": "deployer", "noCrossNamespaceRefs": false,
			"driftInterval": "10m", "reconcileTimeout": "15m", "maxHelmTimeout": "12m",
			"maxSourceSize": 2147483648, "logLevel": "debug", "logFormat": "console",
			"layerCompression": "gzip",
		},
		"egress": map[string]any{"denyCIDRs": []any{"10.96.0.0/12"}, "allowHosts": []any{"mirror.example:5000"}},
		"registry": map[string]any{
			"enabled":     true,
			"persistence": map[string]any{"enabled": true, "size": "5Gi"},
		},
	}
}

func TestChartLints(t *testing.T) {
	for name, vals := range map[string]map[string]any{"defaults": nil, "everything": everything()} {
		t.Run(name, func(t *testing.T) {
			linter := lint.All(chartDir, vals, namespace, false)
			for _, m := range linter.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("helm lint: %s", m)
				} else {
					t.Logf("helm lint: %s", m)
				}
			}
		})
	}
}

func deploymentOf(t *testing.T, objs []*unstructured.Unstructured, name string) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(find(t, objs, "Deployment", name).Object, &d); err != nil {
		t.Fatal(err)
	}
	return &d
}

func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// The helper image builder pods run must be the manager's own image unless
// set, so an install with one image value is complete.
func TestChartHelperImageIsTheManagerImage(t *testing.T) {
	digest := "sha256:" + strings.Repeat("0f", 32)
	cases := []struct {
		name       string
		vals       map[string]any
		image      string
		helper     string
		pullPolicy corev1.PullPolicy
	}{
		{"defaults", nil, "ghcr.io/devloop-dev/devloop:v0.1.0", "ghcr.io/devloop-dev/devloop:v0.1.0", corev1.PullIfNotPresent},
		{"tag", map[string]any{"image": map[string]any{"repository": "10.250.0.1:5000/devloop/manager", "tag": "dev", "pullPolicy": "Always"}},
			"10.250.0.1:5000/devloop/manager:dev", "10.250.0.1:5000/devloop/manager:dev", corev1.PullAlways},
		{"digest wins over tag", map[string]any{"image": map[string]any{"repository": "r.example/devloop", "tag": "dev", "digest": digest}},
			"r.example/devloop@" + digest, "r.example/devloop@" + digest, corev1.PullIfNotPresent},
		{"helper set", map[string]any{"helperImage": "mirror.example/devloop:v0.1.0"},
			"ghcr.io/devloop-dev/devloop:v0.1.0", "mirror.example/devloop:v0.1.0", corev1.PullIfNotPresent},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := deploymentOf(t, renderChart(t, tc.vals), "devloop-manager")
			c := d.Spec.Template.Spec.Containers[0]
			if c.Image != tc.image || c.ImagePullPolicy != tc.pullPolicy {
				t.Errorf("image %s (%s), want %s (%s)", c.Image, c.ImagePullPolicy, tc.image, tc.pullPolicy)
			}
			if got := envValue(c, "DEVLOOP_HELPER_IMAGE"); got != tc.helper {
				t.Errorf("DEVLOOP_HELPER_IMAGE %q, want %q", got, tc.helper)
			}
		})
	}
}

func TestChartRefusesBadValues(t *testing.T) {
	cases := map[string]struct {
		vals map[string]any
		want string
	}{
		"digest without algorithm": {map[string]any{"image": map[string]any{"digest": "0f0f"}}, `image.digest "0f0f" must start with sha256:`},
		"no repository":            {map[string]any{"image": map[string]any{"repository": ""}}, "image.repository is required"},
		"service monitor without metrics": {map[string]any{"metrics": map[string]any{"enabled": false}, "serviceMonitor": map[string]any{"enabled": true}},
			"serviceMonitor.enabled needs metrics.enabled"},
		"no service account": {map[string]any{"serviceAccount": map[string]any{"create": false}}, "serviceAccount.name is required"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := tryRenderChart(tc.vals)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestChartManagerArgs(t *testing.T) {
	d := deploymentOf(t, renderChart(t, everything()), "devloop-manager")
	got := d.Spec.Template.Spec.Containers[0].Args
	want := []string{"--leader-elect", "--metrics-bind-address=:8443", "--health-probe-bind-address=:8081",
		"--work-dir=/var/cache/devloop",
		"--registry-token-bind-address=:5002", "--registry-token-key=/etc/devloop-registry-token/tls.key",
		"--registry-token-cert=/etc/devloop-registry-token/tls.crt", "--registry-token-ttl=5m",
		"--registry-token-tls-cert=/etc/devloop-tls/token.crt", "--registry-token-tls-key=/etc/devloop-tls/token.key",
		"--build-cache-url=https://devloop-build-cache." + namespace + ".svc:5003", "--build-cache-ca-file=/etc/devloop-tls/ca.crt",
		"--build-cache-bind-address=:5003", "--build-cache-service=devloop-system/devloop-build-cache", "--build-cache-tls-cert=/etc/devloop-tls/cache.crt", "--build-cache-tls-key=/etc/devloop-tls/cache.key",
		"--build-cache-max-bytes=2147483648",
		"--watch-label-selector=!sharding.devloop.dev/key", "--concurrent=8", "--concurrent-per-namespace=3", "--default-service-account=deployer",
		"--no-cross-namespace-refs=false", "--drift-interval=10m", "--reconcile-timeout=15m", "--max-helm-timeout=12m",
		"--max-source-size=2147483648",
		"--layer-compression=gzip", "--log-level=debug", "--log-format=console",
		"--egress-deny-cidr=10.96.0.0/12", "--egress-allow-host=mirror.example:5000",
		"--egress-allow-host=devloop-registry." + namespace + ".svc:5000", "--egress-allow-host=devloop-registry." + namespace + ".svc.cluster.local:5000"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("args\n got %q\nwant %q", got, want)
	}
	if *d.Spec.Replicas != 2 {
		t.Errorf("replicas %d, want 2", *d.Spec.Replicas)
	}
}

// The manager's ClusterRole is exactly controller-gen's output: no right
// more, no right less than the +kubebuilder:rbac markers declare.
func TestChartManagerRoleIsTheGeneratedRole(t *testing.T) {
	generated := readClusterRole(t, filepath.Join(testenv.RepoRoot(), "config", "rbac", "role.yaml"))
	var rendered rbacv1.ClusterRole
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(find(t, renderChart(t, nil), "ClusterRole", "devloop-manager-role").Object, &rendered); err != nil {
		t.Fatal(err)
	}
	if len(generated.Rules) == 0 || !reflect.DeepEqual(rendered.Rules, generated.Rules) {
		t.Errorf("chart's manager rules differ from config/rbac/role.yaml (run make manifests)\nchart:     %v\ngenerated: %v", rendered.Rules, generated.Rules)
	}
}

func readClusterRole(t *testing.T, path string) rbacv1.ClusterRole {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(data, &role); err != nil {
		t.Fatal(err)
	}
	return role
}

func TestChartRegistry(t *testing.T) {
	objs := renderChart(t, everything())
	d := deploymentOf(t, objs, "devloop-registry")
	// With registry.auth (the default) clients reach the front, which
	// stands before the registry on the pod's loopback.
	if port := containerNamed(t, d, "front").Ports[0]; port.ContainerPort != 5000 || port.HostPort != 0 {
		t.Errorf("registry port %+v, want container port 5000 and no host port", port)
	}
	// A hostPort is opt-in: Pod Security's baseline and restricted profiles
	// refuse it, so its namespace must allow it (charts/devloop/README.md).
	vals := everything()
	vals["registry"].(map[string]any)["hostPort"] = 5000
	hp := deploymentOf(t, renderChart(t, vals), "devloop-registry")
	if port := containerNamed(t, hp, "front").Ports[0]; port.HostPort != 5000 {
		t.Errorf("registry port %+v, want host port 5000", port)
	}
	svc := find(t, objs, "Service", "devloop-registry")
	if typ, _, _ := unstructured.NestedString(svc.Object, "spec", "type"); typ != "NodePort" {
		t.Errorf("registry Service type %q, want NodePort", typ)
	}
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	if np := fmt.Sprint(ports[0].(map[string]any)["nodePort"]); np != "30500" {
		t.Errorf("nodePort %v, want 30500", np)
	}
	if v := d.Spec.Template.Spec.Volumes[1]; v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "devloop-registry" {
		t.Errorf("storage volume %+v, want the devloop-registry claim", v)
	}
	// Off by default.
	for _, o := range renderChart(t, nil) {
		if strings.Contains(o.GetName(), "registry") {
			t.Errorf("%s/%s rendered with the registry disabled", o.GetKind(), o.GetName())
		}
	}
}

func TestChartServiceMonitorSelectsTheMetricsService(t *testing.T) {
	objs := renderChart(t, everything())
	sm := find(t, objs, "ServiceMonitor", "devloop-manager")
	svc := find(t, objs, "Service", "devloop-manager-metrics")
	selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	for k, v := range selector {
		if svc.GetLabels()[k] != v {
			t.Errorf("ServiceMonitor selects %s=%s; the metrics Service has %q", k, v, svc.GetLabels()[k])
		}
	}
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if port := endpoints[0].(map[string]any)["port"]; port != "metrics" {
		t.Errorf("ServiceMonitor port %v, want metrics", port)
	}
	if sm.GetLabels()["release"] != "prometheus" {
		t.Errorf("ServiceMonitor labels %v lack serviceMonitor.labels", sm.GetLabels())
	}
}

// Every rendered object is accepted by a real kube-apiserver (server-side
// apply, dry run), and every pod template passes the restricted Pod
// Security profile enforced on the namespace.
func TestChartObjectsAcceptedByAPIServer(t *testing.T) {
	ctx := context.Background()
	ensureRestrictedNamespace(t, ctx, namespace)
	for name, vals := range map[string]map[string]any{"defaults": nil, "everything": everything()} {
		t.Run(name, func(t *testing.T) {
			objs := renderChart(t, vals)
			dryRunApply(t, ctx, objs)
			for _, o := range objs {
				if o.GetKind() == "Deployment" {
					d := deploymentOf(t, objs, o.GetName())
					dryRunPod(t, ctx, d)
				}
			}
		})
	}
}

func ensureRestrictedNamespace(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
	}}}
	if err := k8s.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// dryRunApply server-side applies objs with dryRun=All. Objects of API
// groups the test server does not serve (monitoring.coreos.com) are skipped:
// their fields are checked by the tests above.
func dryRunApply(t *testing.T, ctx context.Context, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		if o.GroupVersionKind().Group == "monitoring.coreos.com" {
			continue
		}
		obj := o.DeepCopy()
		err := k8s.Patch(ctx, obj, client.Apply, client.FieldOwner("devloop-install-test"), client.ForceOwnership, client.DryRunAll)
		if err != nil {
			t.Errorf("server-side dry run of %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
}

// dryRunPod creates a pod of d's template (dry run): Pod Security admission
// checks pods, not Deployments.
func dryRunPod(t *testing.T, ctx context.Context, d *appsv1.Deployment) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: d.Name + "-pod", Namespace: d.Namespace},
		Spec:       d.Spec.Template.Spec,
	}
	if err := k8s.Create(ctx, pod, client.DryRunAll); err != nil {
		t.Errorf("a pod of Deployment %s is refused: %v", d.Name, err)
	}
}

// The namespace really enforces the restricted profile: the check above
// would catch a pod that runs as root.
func TestRestrictedNamespaceRefusesARootPod(t *testing.T) {
	ctx := context.Background()
	ensureRestrictedNamespace(t, ctx, namespace)
	d := deploymentOf(t, renderChart(t, nil), "devloop-manager")
	d.Spec.Template.Spec.SecurityContext = nil
	d.Spec.Template.Spec.Containers[0].SecurityContext = nil
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "root", Namespace: namespace}, Spec: d.Spec.Template.Spec}
	err := k8s.Create(ctx, pod, client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "violates PodSecurity") {
		t.Fatalf("a pod without a security context: error %v, want a PodSecurity violation", err)
	}
}

// config/default, the kustomize install, is accepted as well.
func TestKustomizeObjectsAcceptedByAPIServer(t *testing.T) {
	ctx := context.Background()
	ensureRestrictedNamespace(t, ctx, namespace)
	objs := buildKustomize(t, "config/default")
	dryRunApply(t, ctx, objs)
	dryRunPod(t, ctx, deploymentOf(t, objs, "devloop-manager"))
}

// TestChartManagerSurvivesALoadedNode (issue 36 item 2): the manager's
// liveness probe tolerates a starved CPU (the kubelet's default 1 s
// timeout and 3 misses killed it in the middle of builds at load 20 on two
// cores), and the manager knows the memory limit (DEVLOOP_MEMORY_LIMIT; it
// sets the Go runtime's soft limit below it), so it collects before the
// OOM killer acts.
func TestChartManagerSurvivesALoadedNode(t *testing.T) {
	d := deploymentOf(t, renderChart(t, nil), "devloop-manager")
	c := d.Spec.Template.Spec.Containers[0]
	live := c.LivenessProbe
	if live == nil || live.TimeoutSeconds < 5 || live.FailureThreshold*live.PeriodSeconds < 120 {
		t.Errorf("liveness probe %+v: want a timeout of at least 5 s and at least 2 minutes of misses before a restart", live)
	}
	var memLimit *corev1.EnvVar
	for i := range c.Env {
		if c.Env[i].Name == "DEVLOOP_MEMORY_LIMIT" {
			memLimit = &c.Env[i]
		}
	}
	if memLimit == nil || memLimit.ValueFrom == nil || memLimit.ValueFrom.ResourceFieldRef == nil ||
		memLimit.ValueFrom.ResourceFieldRef.Resource != "limits.memory" {
		t.Errorf("DEVLOOP_MEMORY_LIMIT = %+v, want it from the container's limits.memory", memLimit)
	}
}

// buildCache.namespaceMaxBytes reaches the manager; unset, the manager's
// default (half of the store) holds and no flag is rendered.
func TestChartBuildCacheNamespaceShare(t *testing.T) {
	vals := everything()
	vals["buildCache"] = map[string]any{"enabled": true, "port": 5003, "maxBytes": 4294967296, "namespaceMaxBytes": 1073741824}
	args := containerNamed(t, deploymentOf(t, renderChart(t, vals), "devloop-manager"), "manager").Args
	if got := argValue(args, "--build-cache-namespace-max-bytes"); got != "1073741824" {
		t.Errorf("--build-cache-namespace-max-bytes=%q, want 1073741824", got)
	}
	args = containerNamed(t, deploymentOf(t, renderChart(t, everything()), "devloop-manager"), "manager").Args
	if got := argValue(args, "--build-cache-namespace-max-bytes"); got != "" {
		t.Errorf("default values render --build-cache-namespace-max-bytes=%q", got)
	}
}
