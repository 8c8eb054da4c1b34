package controllers

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/supervisor"
)

// liveSyncs stands in for `/.devloop/supervisor sync` in the pods (no pod
// runs in envtest): it records what each sync was given and answers as
// the supervisor does, or fails for the pods told to. Only the operator's
// branch logic is tested with it; the real exec is the e2e test's.
var liveSyncs = &scriptedSync{fail: map[string]string{}}

type syncCall struct {
	Namespace, Pod, Container string
	Command                   []string
	// Files are the tar's entries: name -> "mode:content".
	Files map[string]string
}

type scriptedSync struct {
	mu    sync.Mutex
	calls []syncCall
	fail  map[string]string // namespace/pod -> the sync's error
}

func (s *scriptedSync) Exec(_ context.Context, _ *identity.Tenant, ns, pod, container string, command []string, stdin io.Reader, stdout, stderr io.Writer) error {
	call := syncCall{Namespace: ns, Pod: pod, Container: container, Command: command, Files: map[string]string{}}
	tr := tar.NewReader(stdin)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(tr)
		call.Files[h.Name] = fmt.Sprintf("%03o:%s", h.Mode, body)
	}
	s.mu.Lock()
	s.calls = append(s.calls, call)
	msg := s.fail[ns+"/"+pod]
	s.mu.Unlock()
	if msg != "" {
		fmt.Fprintln(stderr, msg)
		return errors.New("command terminated with exit code 1")
	}
	digest := strings.TrimPrefix(command[len(command)-1], "--digest=")
	return json.NewEncoder(stdout).Encode(map[string]any{"digest": digest, "restartedMs": 7, "files": len(call.Files)})
}

// of are the syncs of digest made to pod in namespace ns.
func (s *scriptedSync) of(ns, pod, digest string) []syncCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []syncCall
	for _, c := range s.calls {
		if c.Namespace == ns && c.Pod == pod && c.Command[len(c.Command)-1] == "--digest="+digest {
			out = append(out, c)
		}
	}
	return out
}

func (s *scriptedSync) failFor(ns, pod, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[ns+"/"+pod] = msg
}

// staticSupervisor builds a static linux/amd64 binary standing in for the
// supervisor live-updatable images get (the build refuses a dynamic one;
// no pod runs it in envtest).
func staticSupervisor(dir string) (string, error) {
	src := filepath.Join(dir, "supervisor.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "supervisor")
	cmd := exec.Command("go", "build", "-o", out, src)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOFLAGS=", "GO111MODULE=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building a static supervisor: %v: %s", err, b)
	}
	return out, nil
}

// liveEnv is webEnv deploying a Deployment of the web image, with /web
// live-updatable.
func liveEnv(ns string) *v1alpha1.DevEnvironment {
	env := webEnv(ns)
	env.Spec.ServiceAccountName = "deployer"
	env.Spec.Components[0].Manifests.Paths = []string{"deploy"}
	env.Spec.Components[0].Images[0].LiveUpdate = &v1alpha1.LiveUpdate{Paths: []string{"/web"}}
	return env
}

func liveSource(binary, page string) map[string]string {
	return map[string]string{"bin/web": binary, "static/index.html": page, "deploy/web.yaml": webDeployment}
}

// deployLiveEnv creates liveEnv at binary v1 in a new namespace and
// waits for its Deployment, which it marks available.
func deployLiveEnv(t *testing.T) (string, *v1alpha1.DevEnvironment) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	useDeployEngine(ns)
	deployer(t, ns, "deployer", true)
	reg.pushSource(t, ns+"/src", "dev", liveSource("binary v1", "<h1>1</h1>"))
	env := liveEnv(ns)
	g.Expect(k8s.Create(ctx, env)).To(Succeed())
	g.Eventually(func(g Gomega) {
		cur := &v1alpha1.DevEnvironment{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(env), cur)).To(Succeed())
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &appsv1.Deployment{})).To(Succeed(), "status: %+v", cur.Status)
	}, timeout).Should(Succeed())
	markAvailable(t, ns, "web")
	return ns, env
}

// webDeploymentNow is the web Deployment as it is.
func webDeploymentNow(g Gomega, ns string) *appsv1.Deployment {
	d := &appsv1.Deployment{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, d)).To(Succeed())
	return d
}

// runningPod makes a pod of the web Deployment's template running image,
// as its ReplicaSet and a kubelet would (envtest runs neither).
func runningPod(t *testing.T, ns, name, image string) {
	t.Helper()
	markRunning(t, startPod(t, ns, name, image))
}

// startPod makes a pod of the web Deployment's template (its labels: the
// operator watches the pods labelled as supervised) that does not run
// yet.
func startPod(t *testing.T, ns, name, image string) *corev1.Pod {
	t.Helper()
	g := NewWithT(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: webDeploymentNow(g, ns).Spec.Template.Labels},
		Spec: corev1.PodSpec{ServiceAccountName: "deployer", AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "web", Image: image}}},
	}
	g.Expect(k8s.Create(context.Background(), pod)).To(Succeed())
	return pod
}

// markRunning says, as the kubelet would, that the pod's container runs.
func markRunning(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", Image: pod.Spec.Containers[0].Image,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
	NewWithT(t).Expect(k8s.Status().Update(context.Background(), pod)).To(Succeed())
}

func podLiveDigest(g Gomega, ns, name string) string {
	pod := &corev1.Pod{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pod)).To(Succeed())
	return pod.Annotations[v1alpha1.LiveDigestAnnotation]
}

// TestLiveUpdateDecidesPerChangedPath drives the real reconciler, build
// (in-process, pushing to the real registry) and deploy engine: a change
// of the live path only is synced into the running pods without touching
// the Deployment; a pod started later is synced too; a sync failing on a
// pod, a path outside the set and an env change are rolled out, and
// status says why each time.
func TestLiveUpdateDecidesPerChangedPath(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, env := deployLiveEnv(t)
	key := client.ObjectKeyFromObject(env)

	// First deploy: a rollout, as always.
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyCurrent(g, env)
		ist := imageOf(env, "web", "web")
		g.Expect(ist.TemplateDigest).To(Equal(ist.Digest))
		g.Expect(ist.LastUpdate).To(Equal(v1alpha1.UpdateRollout))
	})
	v1 := *imageOf(env, "web", "web")
	before := webDeploymentNow(g, ns)
	image := before.Spec.Template.Spec.Containers[0].Image
	g.Expect(image).To(HaveSuffix("@" + v1.Digest))
	g.Expect(before.Spec.Template.Labels).To(HaveKeyWithValue(v1alpha1.LabelLiveUpdate, v1alpha1.LiveUpdateSupervised),
		"the operator watches the template's pods")
	runningPod(t, ns, "web-a", image)
	runningPod(t, ns, "web-b", image)

	// Only the binary changes: synced in place into both pods.
	reg.pushSource(t, ns+"/src", "dev", liveSource("binary v2", "<h1>1</h1>"))
	requestReconcile(t, env)
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyCurrent(g, env)
		ist := imageOf(env, "web", "web")
		g.Expect(ist.Digest).NotTo(Equal(v1.Digest))
		g.Expect(ist.LastUpdate).To(Equal(v1alpha1.UpdateLive), "reason: %s", ist.UpdateReason)
		g.Expect(ist.LiveDigest).To(Equal(ist.Digest))
		g.Expect(ist.TemplateDigest).To(Equal(v1.Digest))
		g.Expect(ist.UpdateReason).To(Equal("synced in place: /web"))
		g.Expect(podLiveDigest(g, ns, "web-a")).To(Equal(ist.Digest))
		g.Expect(podLiveDigest(g, ns, "web-b")).To(Equal(ist.Digest))
	})
	v2 := *imageOf(env, "web", "web")
	g.Expect(condition(env, v1alpha1.ConditionReady).Message).To(ContainSubstring("live update serving: web/web"))
	for _, pod := range []string{"web-a", "web-b"} {
		calls := liveSyncs.of(ns, pod, v2.Digest)
		g.Expect(calls).To(HaveLen(1), "one sync per pod")
		g.Expect(calls[0].Container).To(Equal("web"))
		g.Expect(calls[0].Command).To(Equal([]string{supervisor.Path, "sync", "--digest=" + v2.Digest}))
		g.Expect(calls[0].Files).To(Equal(map[string]string{"/web": "755:binary v2"}), "the tar holds the changed file only, mode kept")
	}
	after := webDeploymentNow(g, ns)
	g.Expect(after.Generation).To(Equal(before.Generation), "no rollout: the template is unchanged")
	g.Expect(after.Spec.Template.Spec.Containers[0].Image).To(Equal(image))
	expectEvent(t, ns, v1alpha1.ReasonLiveUpdated, "synced in place into "+ns+"/web-a, "+ns+"/web-b")

	// A pod started later (rescheduled, scaled up) is synced to the
	// latest digest as soon as it runs, without a new build or reconcile
	// request: nothing else reconciles this environment within the
	// timeout (sources every minute, drift every 5), the pod's start
	// does.
	markRunning(t, startPod(t, ns, "web-c", image))
	g.Eventually(func(g Gomega) {
		g.Expect(podLiveDigest(g, ns, "web-c")).To(Equal(v2.Digest))
	}, timeout).Should(Succeed())
	g.Expect(liveSyncs.of(ns, "web-c", v2.Digest)[0].Files).To(Equal(map[string]string{"/web": "755:binary v2"}))
	g.Expect(liveSyncs.of(ns, "web-a", v2.Digest)).To(HaveLen(1), "a synced pod is not synced again")

	// A sync failing on one pod: the component is rolled out instead.
	liveSyncs.failFor(ns, "web-b", "sync: no supervisor answers at /.devloop/live/.supervisor.sock")
	reg.pushSource(t, ns+"/src", "dev", liveSource("binary v3", "<h1>1</h1>"))
	requestReconcile(t, env)
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		ist := imageOf(env, "web", "web")
		g.Expect(ist.Digest).NotTo(Equal(v2.Digest))
		g.Expect(ist.LastUpdate).To(Equal(v1alpha1.UpdateRollout))
		g.Expect(ist.UpdateReason).To(ContainSubstring("sync failed on pod " + ns + "/web-b"))
		g.Expect(ist.UpdateReason).To(ContainSubstring("no supervisor answers"))
		g.Expect(ist.LiveDigest).To(BeEmpty())
		g.Expect(webDeploymentNow(g, ns).Spec.Template.Spec.Containers[0].Image).To(HaveSuffix("@" + ist.Digest))
	})
	markAvailable(t, ns, "web")
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyCurrent(g, env)
		ist := imageOf(env, "web", "web")
		g.Expect(ist.TemplateDigest).To(Equal(ist.Digest))
		g.Expect(condition(env, v1alpha1.ConditionReady).Message).NotTo(ContainSubstring("live update"))
	})

	// A file outside liveUpdate.paths: a rollout naming it.
	rolled := webDeploymentNow(g, ns)
	reg.pushSource(t, ns+"/src", "dev", liveSource("binary v3", "<h1>2</h1>"))
	requestReconcile(t, env)
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		ist := imageOf(env, "web", "web")
		g.Expect(ist.UpdateReason).To(Equal("/srv/static/index.html changed, outside liveUpdate.paths"))
		g.Expect(ist.LastUpdate).To(Equal(v1alpha1.UpdateRollout))
		d := webDeploymentNow(g, ns)
		g.Expect(d.Generation).To(BeNumerically(">", rolled.Generation))
		g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(HaveSuffix("@" + ist.Digest))
	})
	markAvailable(t, ns, "web")
	eventually(t, key, readyCurrent)

	// An env var of the image: a rollout naming the config field.
	g.Expect(k8s.Get(ctx, key, env)).To(Succeed())
	patched := env.DeepCopy()
	patched.Spec.Components[0].Images[0].Env = []v1alpha1.EnvVar{{Name: "GREETING", Value: "hi"}}
	g.Expect(k8s.Patch(ctx, patched, client.MergeFrom(env))).To(Succeed())
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		ist := imageOf(env, "web", "web")
		g.Expect(ist.UpdateReason).To(Equal("the image config's Env changed"))
		g.Expect(webDeploymentNow(g, ns).Spec.Template.Spec.Containers[0].Image).To(HaveSuffix("@" + ist.Digest))
	})
	markAvailable(t, ns, "web")
	env = eventually(t, key, readyCurrent)

	// A pod of a template that runs the newest digest itself is told it
	// is current (an empty sync), so its supervisor starts the program
	// without waiting out its start gate.
	latest := imageOf(env, "web", "web").Digest
	runningPod(t, ns, "web-d", webDeploymentNow(g, ns).Spec.Template.Spec.Containers[0].Image)
	g.Eventually(func(g Gomega) {
		g.Expect(podLiveDigest(g, ns, "web-d")).To(Equal(latest))
	}, timeout).Should(Succeed())
	g.Expect(liveSyncs.of(ns, "web-d", latest)[0].Files).To(BeEmpty())
	env = eventually(t, key, readyCurrent)
	g.Expect(imageOf(env, "web", "web").LastUpdate).To(Equal(v1alpha1.UpdateRollout), "telling a pod it is current is no live update")
	expectKstatus(t, env, status.CurrentStatus)
}
