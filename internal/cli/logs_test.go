package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// fakeLogs stands in for the kubelet, which envtest has not: every
// container's log is "<pod>/<container> line 1" and "line 2". Pod
// discovery, the part under test, runs against the real API server.
type fakeLogs struct {
	mu     sync.Mutex
	follow []string // streams opened with follow
}

func (f *fakeLogs) Stream(_ context.Context, ns, pod string, o *corev1.PodLogOptions) (io.ReadCloser, error) {
	container, follow := o.Container, o.Follow
	if follow {
		f.mu.Lock()
		f.follow = append(f.follow, pod+"/"+container)
		f.mu.Unlock()
	}
	return io.NopCloser(strings.NewReader(fmt.Sprintf("%s/%s line 1\n%s/%s line 2\n", pod, container, pod, container))), nil
}

func logsPlugin(t *testing.T, logs *fakeLogs, args ...string) result {
	t.Helper()
	opts := testOptions()
	opts.Logs = logs
	out, errOut, wait := pluginInBackground(t, opts, args...)
	code := wait()
	return result{out: out.String(), err: errOut.String(), code: code}
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := k8s.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %s: %v", o.GetName(), err)
		}
	}
}

func pod(ns, name string, labels map[string]string, containers ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Image: "registry.test/" + c})
	}
	return p
}

// job creates a Job; the API server gives it a selector on its uid, and
// pods of it are made with those labels.
func job(t *testing.T, ns, name string) *batchv1.Job {
	t.Helper()
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: batchv1.JobSpec{
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "test", Image: "registry.test/test"}}}},
	}}
	create(t, j)
	return j
}

func jobPod(j *batchv1.Job, name string) *corev1.Pod {
	p := pod(j.Namespace, name, j.Spec.Selector.MatchLabels, "test")
	p.Spec.InitContainers = []corev1.Container{{Name: "fetch", Image: "registry.test/fetch"}}
	return p
}

func TestLogsOfAComponentFindsThePodsOfItsWorkloads(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "team", teamSpec())
	labels := map[string]string{"app": "web"}
	create(t,
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.test/web"}}}},
		}},
		pod(ns, "web-b", labels, "web", "sidecar"),
		pod(ns, "web-a", labels, "web"),
		pod(ns, "other", map[string]string{"app": "other"}, "other"),
	)
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		env.Status.Components = []v1alpha1.ComponentStatus{{Name: "web", Phase: v1alpha1.PhaseReady, Inventory: []v1alpha1.ObjectRef{
			{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: ns, Name: "web"},
			{Version: "v1", Kind: "ConfigMap", Namespace: ns, Name: "web-config"},
		}}}
	})
	r := logsPlugin(t, &fakeLogs{}, "logs", "team", "web", "-n", ns)
	if r.code != 0 {
		t.Fatal(r)
	}
	want := "[web-a/web] web-a/web line 1\n[web-a/web] web-a/web line 2\n" +
		"[web-b/web] web-b/web line 1\n[web-b/web] web-b/web line 2\n" +
		"[web-b/sidecar] web-b/sidecar line 1\n[web-b/sidecar] web-b/sidecar line 2\n"
	if r.out != want {
		t.Fatalf("got\n%s\nwant\n%s", r.out, want)
	}
	// One container: no prefixes.
	r = logsPlugin(t, &fakeLogs{}, "logs", "team", "web", "-c", "sidecar", "-n", ns)
	if r.code != 0 || r.out != "web-b/sidecar line 1\nweb-b/sidecar line 2\n" {
		t.Fatalf("-c sidecar:\n%s", r)
	}
}

// A Helm component's pods are found through the workloads of its release,
// as the operator records them in status.
func TestLogsOfAHelmComponentFromItsRelease(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "team", teamSpec())
	labels := map[string]string{"app": "helm-web"}
	create(t, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: appsv1.StatefulSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.test/web"}}}},
	}}, pod(ns, "web-0", labels, "web"),
		// Labelled as the release's, but not of its workloads: the
		// fallback must not be taken when the workloads have pods.
		pod(ns, "stray", map[string]string{helmInstanceLabel: "web"}, "stray"))
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		env.Status.Components = []v1alpha1.ComponentStatus{{Name: "web", Phase: v1alpha1.PhaseReady,
			Release: &v1alpha1.ReleaseStatus{Name: "web", Namespace: ns, Revision: 1, Workloads: []v1alpha1.ObjectRef{
				{Group: "apps", Version: "v1", Kind: "StatefulSet", Namespace: ns, Name: "web"},
			}}}}
	})
	r := logsPlugin(t, &fakeLogs{}, "logs", "team", "web", "-n", ns)
	if r.code != 0 || r.out != "web-0/web line 1\nweb-0/web line 2\n" || r.err != "" {
		t.Fatalf("got\n%s", r)
	}
}

// A release whose status records no workloads (an older operator, or a
// chart whose pods an operator it installs makes) falls back to the pods
// labelled with the release's name.
func TestLogsOfAHelmComponentFallBackToTheInstanceLabel(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "team", teamSpec())
	create(t, pod(ns, "web-0", map[string]string{helmInstanceLabel: "web"}, "web"))
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		env.Status.Components = []v1alpha1.ComponentStatus{{Name: "web", Phase: v1alpha1.PhaseReady,
			Release: &v1alpha1.ReleaseStatus{Name: "web", Namespace: ns, Revision: 1}}}
	})
	r := logsPlugin(t, &fakeLogs{}, "logs", "team", "web", "-n", ns)
	if r.code != 0 || r.out != "web-0/web line 1\nweb-0/web line 2\n" || !strings.Contains(r.err, "status records no workloads of Helm release") {
		t.Fatalf("got\n%s", r)
	}
}

func TestLogsOfATestRunAndABuild(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "team", teamSpec())
	unit1, unit2, build := job(t, ns, "unit-1"), job(t, ns, "unit-2"), job(t, ns, "web-build-1")
	create(t, jobPod(unit1, "unit-1-x"), jobPod(unit2, "unit-2-x"), jobPod(build, "web-build-1-x"))
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		setRun(env, "unit", v1alpha1.TestRun{Number: 1, Result: v1alpha1.ResultPassed, JobName: "unit-1"})
		setRun(env, "unit", v1alpha1.TestRun{Number: 2, Result: v1alpha1.ResultFailed, JobName: "unit-2"})
		env.Status.Components = []v1alpha1.ComponentStatus{{Name: "web", Phase: v1alpha1.PhaseFailed, Images: []v1alpha1.ImageStatus{
			{Name: "web", Build: &v1alpha1.BuildStatus{Job: "web-build-1", Result: v1alpha1.BuildFailed}}}}}
	})

	// The latest run by default, init containers first.
	r := logsPlugin(t, &fakeLogs{}, "logs", "team", "unit", "-n", ns)
	if r.code != 0 || !strings.HasPrefix(r.out, "[unit-2-x/fetch] unit-2-x/fetch line 1\n") || !strings.Contains(r.out, "[unit-2-x/test] unit-2-x/test line 2\n") {
		t.Fatalf("latest run:\n%s", r)
	}
	r = logsPlugin(t, &fakeLogs{}, "logs", "team", "unit", "--run", "1", "-c", "test", "-n", ns)
	if r.code != 0 || r.out != "unit-1-x/test line 1\nunit-1-x/test line 2\n" {
		t.Fatalf("--run 1:\n%s", r)
	}
	r = logsPlugin(t, &fakeLogs{}, "logs", "team", "web/web", "-n", ns)
	if r.code != 0 || !strings.Contains(r.out, "[web-build-1-x/test] web-build-1-x/test line 1") {
		t.Fatalf("build:\n%s", r)
	}

	for args, want := range map[string][]string{
		"run 9":    {"unit", "--run", "9"},
		"no image": {"web/api"},
		"unknown":  {"nope"},
		"never":    {"smoke"},
	} {
		r := logsPlugin(t, &fakeLogs{}, append([]string{"logs", "team", "-n", ns}, want...)...)
		msg := map[string]string{
			"run 9":    "suite unit has no run #9 in status (runs kept: #2, #1)",
			"no image": `component web has no image "api"`,
			"unknown":  `has no component or suite "nope": it has crds, web, unit, e2e, smoke`,
			"never":    "suite smoke has not run yet: start it with `kubectl devloop trigger team smoke`",
		}[args]
		if r.code != 1 || !strings.Contains(r.err, msg) {
			t.Errorf("%s: want %q, got\n%s", args, msg, r)
		}
	}
}

func TestLogsFollowWaitsForTheRunsPod(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "team", teamSpec())
	j := job(t, ns, "e2e-1")
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		setRun(env, "e2e", v1alpha1.TestRun{Number: 1, Result: v1alpha1.ResultPending, JobName: "e2e-1"})
	})
	logs := &fakeLogs{}
	opts := testOptions()
	opts.Logs = logs
	out, errOut, wait := pluginInBackground(t, opts, "logs", "team", "e2e", "-f", "-n", ns)
	waitUntil(t, "the wait for the pod", func() bool { return strings.Contains(errOut.String(), "waiting for the pods of e2e #1") })
	create(t, jobPod(j, "e2e-1-x"))
	if code := wait(); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "[e2e-1-x/test] e2e-1-x/test line 2") || len(logs.follow) != 2 {
		t.Fatalf("want both containers followed, got %v\n%s", logs.follow, out.String())
	}
}
