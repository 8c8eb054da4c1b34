package steadystate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/metrics"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/internal/testregistry"
	"github.com/devloop-dev/devloop/test/builder"
)

// size is the benchmark's shape, from the environment: DEVLOOP_BENCH_ENVS
// environments (50) of DEVLOOP_BENCH_COMPONENTS components (10), idle for
// DEVLOOP_BENCH_QUIET (1m; the goal is stated over 10m). -short
// makes it 5 environments idle for 10s.
type size struct {
	envs, components int
	quiet            time.Duration
}

func benchSize(b *testing.B) size {
	s := size{envs: 50, components: 10, quiet: time.Minute}
	if testing.Short() {
		s = size{envs: 5, components: 10, quiet: 10 * time.Second}
	}
	if v, err := strconv.Atoi(os.Getenv("DEVLOOP_BENCH_ENVS")); err == nil && v > 0 {
		s.envs = v
	}
	if v, err := strconv.Atoi(os.Getenv("DEVLOOP_BENCH_COMPONENTS")); err == nil && v > 0 {
		s.components = v
	}
	if v, err := time.ParseDuration(os.Getenv("DEVLOOP_BENCH_QUIET")); err == nil && v > 0 {
		s.quiet = v
	}
	b.Logf("%d environments x %d components, idle %s", s.envs, s.components, s.quiet)
	return s
}

// helmEvery is how often an environment deploys its last two components
// with Helm (the web chart) instead of manifests: one in five.
const helmEvery = 5

// BenchmarkSteadyState brings environments of manifests components (a
// ConfigMap and a Deployment each; Helm releases in one environment in
// five) to Ready through the operator running in this process, then
// measures:
//
//   - no-op reconciles: each b.Loop iteration reconciles every environment
//     once, by calling the operator's own reconciler (the manager keeps
//     running and may reconcile too: its reconciles, equally no-ops, are
//     counted with these); p50/p99 of one environment's reconcile, and API
//     requests per reconcile, reads and writes apart (internal/metrics
//     counts every request: the operator's and the impersonated tenants',
//     Helm's included);
//   - idle cost: the operator left alone at its default intervals for the
//     quiet period: CPU seconds per minute (getrusage of this process,
//     which runs the operator; envtest and the registry are other
//     processes), resident memory (VmRSS, VmHWM), reconciles and requests
//     per minute.
//
// Figures are reported, never asserted. docs/performance.md has them.
func BenchmarkSteadyState(b *testing.B) {
	sz := benchSize(b)
	ctx := context.Background()
	host := testregistry.Start(b)
	r, requests := startOperator(b)

	started := time.Now()
	keys := make([]client.ObjectKey, 0, sz.envs)
	for i := range sz.envs {
		keys = append(keys, createEnvironment(b, host, i, sz.components))
	}
	bringReady(b, keys, 15*time.Minute)
	bringup := time.Since(started)

	// No-op reconciles.
	var durations []time.Duration
	reqBefore, recBefore := requests.Snapshot(), managerReconciles(b)
	b.ResetTimer()
	for b.Loop() {
		for _, key := range keys {
			t0 := time.Now()
			if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
				b.Fatalf("%s: %v", key, err)
			}
			durations = append(durations, time.Since(t0))
		}
	}
	b.StopTimer()
	// Reported after the loop: ResetTimer drops metrics reported before.
	b.ReportMetric(bringup.Seconds(), "bringup-s")
	reqs := requests.Snapshot().Sub(reqBefore)
	reconciles := float64(len(durations)) + managerReconciles(b) - recBefore
	sort.Slice(durations, func(i, j int) bool { return durations[i] < durations[j] })
	b.ReportMetric(ms(percentile(durations, 0.50)), "noop-p50-ms")
	b.ReportMetric(ms(percentile(durations, 0.99)), "noop-p99-ms")
	b.ReportMetric(float64(reqs.Reads())/reconciles, "reads/noop")
	b.ReportMetric(float64(reqs.Writes())/reconciles, "writes/noop")
	b.ReportMetric(float64(reqs[metrics.VerbDryRun])/reconciles, "dryruns/noop")
	b.Logf("no-op reconciles: %d direct + %.0f by the manager; requests by verb: %s",
		len(durations), reconciles-float64(len(durations)), verbs(reqs))
	for _, key := range keys {
		expectReady(b, key)
	}

	// Idle at the default intervals.
	cpuBefore, reqBefore, recBefore := cpuTime(b), requests.Snapshot(), managerReconciles(b)
	time.Sleep(sz.quiet)
	minutes := sz.quiet.Minutes()
	idleReqs := requests.Snapshot().Sub(reqBefore)
	b.ReportMetric((cpuTime(b)-cpuBefore).Seconds()/minutes, "idle-cpu-s/min")
	b.ReportMetric((managerReconciles(b)-recBefore)/minutes, "idle-reconciles/min")
	b.ReportMetric(float64(idleReqs.Reads()+idleReqs.Writes()+idleReqs[metrics.VerbDryRun])/minutes, "idle-requests/min")
	b.ReportMetric(float64(idleReqs.Writes())/minutes, "idle-writes/min")
	rss, hwm := procMemory(b)
	b.ReportMetric(float64(rss)/(1<<20), "rss-MiB")
	b.ReportMetric(float64(hwm)/(1<<20), "rss-peak-MiB")
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	b.Logf("idle %s: requests by verb %s; Go heap in use %d MiB; load %s", sz.quiet, verbs(idleReqs), mem.HeapInuse>>20, loadavg())
}

// createEnvironment makes namespace steady-<i> with its deployer, pushes
// the environment's source (every component's manifests and the web
// chart) and creates the environment.
func createEnvironment(b *testing.B, host string, i, components int) client.ObjectKey {
	b.Helper()
	ctx := context.Background()
	ns := fmt.Sprintf("steady-%02d", i)
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	if err := testenv.CreateDeployer(ctx, k8s, ns, "deployer"); err != nil {
		b.Fatal(err)
	}
	files := webChart()
	helm := i%helmEvery == 0
	env := builder.Env(ns, "team").In(host).ServiceAccount("deployer").PushedSource(builder.AppSource, "app").Obj()
	for c := range components {
		name := fmt.Sprintf("c%d", c)
		comp := v1alpha1.Component{Name: name}
		if helm && c >= components-2 {
			comp.Helm = &v1alpha1.HelmSpec{Chart: v1alpha1.ChartRef{Source: "app", Path: "chart"}, ReleaseName: name}
		} else {
			comp.Manifests = &v1alpha1.ManifestsSpec{Source: "app", Paths: []string{name}}
			files[name+"/config.yaml"] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {a: b}\n", name)
			files[name+"/deployment.yaml"] = deployment(name)
		}
		env.Spec.Components = append(env.Spec.Components, comp)
	}
	push(b, host+"/"+ns+"/app:dev", files)
	if err := k8s.Create(ctx, env); err != nil {
		b.Fatal(err)
	}
	return client.ObjectKeyFromObject(env)
}

func deployment(name string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s}
spec:
  replicas: 1
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      containers: [{name: app, image: registry.test/%[1]s:1}]
`, name)
}

// webChart is the controllers tests' web chart (a ConfigMap and a
// Deployment) under chart/.
func webChart() map[string]string {
	files := map[string]string{}
	root := filepath.Join(testenv.FeatureCharts(), "web")
	for _, f := range []string{"Chart.yaml", "values.yaml", "templates/config.yaml", "templates/deployment.yaml"} {
		data, err := os.ReadFile(root + "/" + f)
		if err != nil {
			panic(err)
		}
		files["chart/"+f] = string(data)
	}
	return files
}

// bringReady plays the Deployment controller envtest lacks (every
// Deployment of the environments' namespaces is marked available once it
// exists) until every environment is Ready.
func bringReady(b *testing.B, keys []client.ObjectKey, timeout time.Duration) {
	b.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	for {
		deps := &appsv1.DeploymentList{}
		if err := k8s.List(ctx, deps); err != nil {
			b.Fatal(err)
		}
		for i := range deps.Items {
			d := &deps.Items[i]
			if strings.HasPrefix(d.Namespace, "steady-") && d.Status.ObservedGeneration != d.Generation {
				markAvailable(ctx, d)
			}
		}
		notReady := 0
		var last string
		for _, key := range keys {
			env := &v1alpha1.DevEnvironment{}
			if err := k8s.Get(ctx, key, env); err != nil {
				b.Fatal(err)
			}
			if !isReady(env) {
				notReady++
				if c := meta.FindStatusCondition(env.Status.Conditions, v1alpha1.ConditionReady); c != nil {
					last = key.String() + ": " + c.Message
				}
			}
		}
		if notReady == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d environments not Ready after %s (%s)", notReady, timeout, last)
		}
		time.Sleep(2 * time.Second)
	}
}

// markAvailable writes the status a Deployment controller would once its
// pods are up; a conflict is retried at the next look.
func markAvailable(ctx context.Context, d *appsv1.Deployment) {
	n := ptr.Deref(d.Spec.Replicas, 1)
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
		},
	}
	_ = k8s.Status().Update(ctx, d)
}

func isReady(env *v1alpha1.DevEnvironment) bool {
	c := meta.FindStatusCondition(env.Status.Conditions, v1alpha1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && env.Status.ObservedGeneration == env.Generation
}

// expectReady fails unless the environment is Ready and kstatus Current:
// a fast no-op that broke status would be no result.
func expectReady(b *testing.B, key client.ObjectKey) {
	b.Helper()
	env := &v1alpha1.DevEnvironment{}
	if err := k8s.Get(context.Background(), key, env); err != nil {
		b.Fatal(err)
	}
	res, err := testenv.Kstatus(env)
	if err != nil {
		b.Fatal(err)
	}
	if !isReady(env) || res.Status.String() != "Current" {
		b.Fatalf("%s after the no-op reconciles: kstatus %s (%s), conditions %v", key, res.Status, res.Message, env.Status.Conditions)
	}
}

// managerReconciles is controller_runtime_reconcile_total of the
// DevEnvironment controller, every result.
func managerReconciles(b *testing.B) float64 {
	b.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	var n float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "devenvironment" {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// cpuTime is the user and system CPU time of this process so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procMemory is this process's resident set now and at its peak
// (/proc/self/status VmRSS, VmHWM), in bytes.
func procMemory(b *testing.B) (rss, hwm int64) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			hwm = kb << 10
		}
	}
	return rss, hwm
}

func loadavg() string {
	data, _ := os.ReadFile("/proc/loadavg")
	return strings.TrimSpace(string(data))
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func verbs(s metrics.Snapshot) string {
	var parts []string
	for v, n := range s {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", v, n))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}
