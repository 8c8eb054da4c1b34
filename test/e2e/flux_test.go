//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/devcluster"
	. "github.com/devloop-dev/devloop/test/e2e/fixture"
	"github.com/devloop-dev/devloop/test/e2e/poll"
)

// flux is Flux's source-controller and kustomize-controller on the cluster
// (devcluster.InstallFlux). DEVLOOP_E2E_FLUX=skip skips the Flux tests:
// their first run builds both controllers (minutes, docs/flux-e2e.md).
var flux = &clusterAddon[*devcluster.Flux]{name: "Flux", skipVar: "DEVLOOP_E2E_FLUX",
	install: func(ctx context.Context, c *devcluster.Cluster) (*devcluster.Flux, error) {
		return c.InstallFlux(ctx, os.Stderr)
	}}

// needFlux is need plus Flux running.
func needFlux(t *testing.T) *devcluster.Flux {
	t.Helper()
	fluxInstall, took := flux.need(t)
	t.Logf("Flux source-controller v%s (%s) and kustomize-controller v%s (%s) running; installed in %s",
		fluxInstall.SourceController.Version, fluxInstall.SourceController.Image,
		fluxInstall.KustomizeController.Version, fluxInstall.KustomizeController.Image, took.Round(time.Millisecond))
	return fluxInstall
}

// TestFluxAppliesAndHealthChecksAnEnvironment is devloop used through
// GitOps with real Flux controllers: an OCIRepository on the cluster's
// registry carries a DevEnvironment (env/) and the manifests it deploys
// (app/, read by the environment from the same Flux artifact through
// sourceRef); a Kustomization with wait: true applies it as the namespace's
// deployer.
//
//  1. The Kustomization is Ready only once the DevEnvironment is.
//  2. A changed manifest pushed to the source rolls through.
//  3. A token trigger committed to the source runs the suite once, however
//     often Flux applies it again.
//  4. Deleting the Kustomization (prune) deletes the environment and what
//     it deployed.
func TestFluxAppliesAndHealthChecksAnEnvironment(t *testing.T) {
	c := need(t)
	needFlux(t)
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, "e2e-flux")
	repo := registry + "/" + ns + "/hello-config"
	dir := t.TempDir()
	push := func(greeting, trigger string) string {
		t.Helper()
		writeFluxRepo(t, dir, greeting, trigger)
		digest, err := devcluster.PushFluxArtifact(ctx, dir, repo+":latest", greeting)
		g.Expect(err).NotTo(HaveOccurred())
		return digest
	}
	envKey := client.ObjectKey{Namespace: ns, Name: "hello"}

	// 1. Applied and health-checked.
	start := time.Now()
	digest := push("v1", "")
	g.Expect(c.ApplyYAML(ctx, fluxSync(ns, repo))).To(Succeed())
	ks, env := waitKustomizationReady(t, ns, digest)
	ksReady := meta.FindStatusCondition(ks.Conditions, "Ready")
	envReady := meta.FindStatusCondition(env.Status.Conditions, v1alpha1.ConditionReady)
	// Both are written by controllers on this one node's clock, in whole
	// seconds: Flux's Ready may share the environment's second, never
	// precede it.
	g.Expect(ksReady.LastTransitionTime.Before(&envReady.LastTransitionTime)).To(BeFalse(),
		"Kustomization Ready at %s, before the DevEnvironment at %s", ksReady.LastTransitionTime, envReady.LastTransitionTime)
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, &corev1.ConfigMap{})).To(Succeed())
	t.Logf("phase 1: Kustomization Ready %s after the push (DevEnvironment Ready at %s, Kustomization at %s: %s)",
		time.Since(start).Round(time.Millisecond), envReady.LastTransitionTime.Format(time.TimeOnly),
		ksReady.LastTransitionTime.Format(time.TimeOnly), ksReady.Message)

	// 2. A change in the source: a new greeting in both manifests.
	start = time.Now()
	digest = push("v2", "")
	requestFluxReconcile(t, ociRepositoryGVK, ns, "hello")
	waitEnv(t, envKey, 3*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyNow(g, env)
		src := env.Status.Source("config")
		g.Expect(src).NotTo(BeNil())
		g.Expect(src.Revision).To(HaveSuffix(digest), "the environment deployed the new artifact")
	})
	cm := &corev1.ConfigMap{}
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, cm)).To(Succeed())
	g.Expect(cm.Data).To(HaveKeyWithValue("greeting", "v2"))
	dep := &appsv1.Deployment{}
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, dep)).To(Succeed())
	g.Expect(dep.Spec.Template.Spec.Containers[0].Env).To(ContainElement(corev1.EnvVar{Name: "GREETING", Value: "v2"}))
	g.Expect(dep.Status.ObservedGeneration).To(Equal(dep.Generation))
	g.Expect(dep.Status.UpdatedReplicas).To(Equal(dep.Status.Replicas), "the environment is Ready only once the new pods are")
	t.Logf("phase 2: changed manifests deployed and rolled out %s after the push", time.Since(start).Round(time.Millisecond))
	waitKustomizationReady(t, ns, digest)

	// 3. A token trigger committed to the source.
	start = time.Now()
	trigger := fmt.Sprintf("unit-tests@%d", time.Now().UnixNano())
	digest = push("v2", trigger)
	requestFluxReconcile(t, ociRepositoryGVK, ns, "hello")
	env = waitEnv(t, envKey, 3*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.LastHandledTrigger).To(Equal(trigger))
		runs := testRuns(env, "unit-tests")
		g.Expect(runs).To(HaveLen(1))
		g.Expect(runs[0].Result).To(Equal(v1alpha1.ResultPassed), "run: %s %s", runs[0].Message, runs[0].LogTail)
	})
	t.Logf("phase 3: token trigger %s ran unit-tests once (%s) %s after the push", trigger, testRuns(env, "unit-tests")[0].JobName,
		time.Since(start).Round(time.Millisecond))
	waitKustomizationReady(t, ns, digest)
	start = time.Now()
	for i := 0; i < 2; i++ {
		requestFluxReconcile(t, kustomizationGVK, ns, "hello")
		// And the environment reconciles once more after each re-apply.
		at := requestReconcile(t, env)
		waitEnv(t, envKey, time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
			g.Expect(env.Status.LastHandledReconcileAt).To(Equal(at))
		})
	}
	env = waitEnv(t, envKey, time.Minute, false, readyNow)
	g.Expect(env.Annotations).To(HaveKeyWithValue(v1alpha1.TriggerAnnotationPrefixed, trigger), "the token stays: Flux would put it back")
	g.Expect(testRuns(env, "unit-tests")).To(HaveLen(1), "re-applies of the same token start nothing")
	jobs := &metav1.PartialObjectMetadataList{}
	jobs.SetGroupVersionKind(batchJobListGVK)
	g.Expect(c.Client.List(ctx, jobs, client.InNamespace(ns))).To(Succeed())
	g.Expect(jobs.Items).To(HaveLen(1), "one test Job in the namespace")
	t.Logf("phase 3: two Flux re-applies and environment reconciles in %s, still one run", time.Since(start).Round(time.Millisecond))

	// 4. Pruned with the Kustomization.
	start = time.Now()
	g.Expect(c.Client.Delete(ctx, fluxObject(kustomizationGVK, ns, "hello"))).To(Succeed())
	gone := []struct {
		obj  client.Object
		name string
	}{
		{fluxObject(kustomizationGVK, ns, "hello"), "hello"},
		{&v1alpha1.DevEnvironment{}, "hello"},
		{&corev1.ConfigMap{}, "settings"},
		{&appsv1.Deployment{}, "web"},
	}
	waitCheck(t, poll.Wait{What: "the Kustomization and what it applied pruned", Every: 250 * time.Millisecond, Within: 2 * time.Minute}, func(g Gomega) {
		for _, o := range gone {
			err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: o.name}, o.obj)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s is still there (err %v)", o.obj, o.name, err)
		}
	})
	t.Logf("phase 4: Kustomization, DevEnvironment, ConfigMap and Deployment deleted %s after the Kustomization's deletion",
		time.Since(start).Round(time.Millisecond))
}

func testRuns(env *v1alpha1.DevEnvironment, suite string) []v1alpha1.TestRun {
	if ts := env.Status.Test(suite); ts != nil {
		return ts.Runs
	}
	return nil
}

// writeFluxRepo writes the repository Flux carries into dir: env/ holds
// the DevEnvironment the Kustomization applies, app/ the manifests the
// environment deploys, read from the same artifact (source "config" is
// the OCIRepository). trigger, when set, is committed as the environment's
// devloop.dev/trigger annotation.
func writeFluxRepo(t *testing.T, dir, greeting, trigger string) {
	t.Helper()
	annotations := ""
	if trigger != "" {
		annotations = fmt.Sprintf("\n  annotations:\n    %s: %q", v1alpha1.TriggerAnnotationPrefixed, trigger)
	}
	g := NewWithT(t)
	g.Expect(os.RemoveAll(dir)).To(Succeed())
	writeFiles(t, dir, Files{
		"env/hello.yaml": `apiVersion: devloop.dev/v1alpha1
kind: DevEnvironment
metadata:
  name: hello` + annotations + `
spec:
  serviceAccountName: deployer
  sources:
  - name: config
    interval: 5s
    sourceRef: {kind: OCIRepository, name: hello}
  components:
  - name: settings
    manifests: {source: config, paths: [app/settings]}
  - name: web
    dependsOn: [settings]
    manifests: {source: config, paths: [app/web]}
  tests:
  - name: unit-tests
    image: {ref: ` + busybox + `}
    command: [sh, -c, "echo unit tests pass"]
    dependsOn: [web]
    timeout: 2m
`,
		"app/settings/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {greeting: " + greeting + "}\n",
		// Ready 5 s after it starts: an environment that is not Ready at
		// once, so a Kustomization not waiting for it would show.
		"app/web/deployment.yaml": Deployment("web", "web", "image: "+busybox, idleCommand,
			"env: [{name: GREETING, value: "+greeting+"}]",
			`readinessProbe: {exec: {command: ["true"]}, initialDelaySeconds: 5, periodSeconds: 1}`),
	})
}

// fluxSync is the OCIRepository and the Kustomization, in namespace ns, as
// a team would commit them next to a Flux install.
func fluxSync(ns, repo string) string {
	return `apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata: {name: hello, namespace: ` + ns + `}
spec:
  interval: 1m
  url: oci://` + repo + `
  ref: {tag: latest}
  insecure: true
  layerSelector:
    mediaType: ` + string(devcluster.FluxContentMediaType) + `
    operation: extract
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: hello, namespace: ` + ns + `}
spec:
  interval: 10m
  retryInterval: 10s
  timeout: 3m
  path: ./env
  prune: true
  wait: true
  serviceAccountName: deployer
  targetNamespace: ` + ns + `
  sourceRef: {kind: OCIRepository, name: hello}
`
}

// waitKustomizationReady follows the Kustomization until it is Ready
// having applied the artifact of digest, and fails at once if it is ever
// Ready for that artifact while the DevEnvironment is not. It returns both
// as they were then.
func waitKustomizationReady(t *testing.T, ns, digest string) (*kustomizationStatus, *v1alpha1.DevEnvironment) {
	t.Helper()
	c := need(t)
	last := ""
	var ks *kustomizationStatus
	var env *v1alpha1.DevEnvironment
	waitFor(t, poll.Wait{What: "Kustomization " + ns + "/hello Ready for " + digest, Every: 200 * time.Millisecond, Within: 4 * time.Minute},
		func(ctx context.Context) (string, bool, error) {
			var err error
			ks, err = getKustomization(ctx, ns, "hello")
			if err != nil && !apierrors.IsNotFound(err) {
				return err.Error(), false, err
			}
			env = &v1alpha1.DevEnvironment{}
			envErr := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hello"}, env)
			envLine := "no DevEnvironment"
			if envErr == nil {
				envLine = devcluster.Summary(env)
			}
			ksLine := "no Kustomization"
			if ks != nil {
				ksLine = ks.summary()
			}
			seen := ksLine + " | " + envLine
			if seen != last {
				t.Logf("  Kustomization %s | DevEnvironment %s", ksLine, envLine)
				last = seen
			}
			if ks != nil && ks.readyFor(digest) {
				if envErr != nil || env.Status.ObservedGeneration != env.Generation ||
					!meta.IsStatusConditionTrue(env.Status.Conditions, v1alpha1.ConditionReady) {
					return seen, false, fmt.Errorf("the Kustomization is Ready (%s) while the DevEnvironment is not: %s", ksLine, envLine)
				}
				return seen, true, nil
			}
			if ks != nil && ks.stalledFor(digest) {
				return seen, false, fmt.Errorf("the Kustomization failed: %s (DevEnvironment %s)", ksLine, envLine)
			}
			return seen, false, nil
		})
	return ks, env
}
