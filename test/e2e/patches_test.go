//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	. "github.com/devloop-dev/devloop/test/builder"
	. "github.com/devloop-dev/devloop/test/e2e/fixture"
)

// patchedAppScript is the built image's program: "migrate" (the hook)
// exits at once, anything else serves (sleeps) with its args.
const patchedAppScript = `#!/bin/sh
echo "args: $*"
case "$1" in migrate) exit 0 ;; esac
exec sleep 3600
`

// patchedChart is an operator chart whose pre-install hook Job (a
// migration) runs the operator's own image: Helm 3 post-renders no hook.
var patchedChart = Files{
	"chart/Chart.yaml":  "apiVersion: v2\nname: patched\nversion: 0.1.0\n",
	"chart/values.yaml": "image: app:latest\n",
	"chart/templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: {{ .Release.Name }}}
spec:
  selector: {matchLabels: {app: {{ .Release.Name }}}}
  template:
    metadata: {labels: {app: {{ .Release.Name }}}}
    spec:
      ` + restrictedPod + `
      containers:
      - name: app
        image: {{ .Values.image }}
        args: [serve]
        ` + restrictedContainer + `
`,
	"chart/templates/migrate.yaml": `apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-migrate
  annotations:
    helm.sh/hook: pre-install,pre-upgrade
    helm.sh/hook-delete-policy: before-hook-creation
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      ` + restrictedPod + `
      containers:
      - name: migrate
        image: {{ .Values.image }}
        args: [migrate]
        ` + restrictedContainer + `
`,
}

// TestPatchesAndAPinnedHookJob on the real cluster: a debug patch changes
// the args of the chart's Deployment, and the running pod has them; the
// chart's pre-install hook Job runs the built image by digest with its
// own patched args, and completes before the release is installed.
func TestPatchesAndAPinnedHookJob(t *testing.T) {
	c := need(t)
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, "e2e-patch")
	env := newEnv(ns, "patched").Registry().Components(Component("app",
		Images(Image("app", Base(busybox), Program("bin/app", "/app"))),
		Chart("chart", func(h *v1alpha1.HelmSpec) {
			h.ReleaseName = "site"
			h.Patches = []v1alpha1.Patch{
				{Patch: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: site}\n" +
					"spec: {template: {spec: {containers: [{name: app, args: [serve, --debug, --v=4]}]}}}\n"},
				{Target: &v1alpha1.PatchTarget{Group: "batch", Kind: "Job", Name: "site-migrate"},
					Patch: "- {op: add, path: /spec/template/spec/containers/0/args/-, value: --dry-run=false}\n"},
			}
		}))).Build()
	pushDir(t, env, sourceDir(t, patchedChart.With(Files{"bin/app": patchedAppScript})))
	g.Expect(c.ApplyEnvironment(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	started := time.Now()
	got := waitEnv(t, key, 4*time.Minute, false, readyNow)
	t.Logf("patched release with its hook Ready in %s", time.Since(started).Round(time.Millisecond))
	pinned := registry + "/" + ns + "/app@" + imageOf(got, "app").Digest

	job := &batchv1.Job{}
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "site-migrate"}, job)).To(Succeed())
	g.Expect(job.Status.Succeeded).To(BeNumerically(">=", 1), "the hook ran to completion")
	g.Expect(job.Spec.Template.Spec.Containers[0].Image).To(Equal(pinned), "the hook ran the built image by digest")
	g.Expect(job.Spec.Template.Spec.Containers[0].Args).To(Equal([]string{"migrate", "--dry-run=false"}))

	pods := readyPods(g, ns, map[string]string{"app": "site"})
	g.Expect(pods).To(HaveLen(1))
	g.Expect(pods[0].Spec.Containers[0].Image).To(Equal(pinned))
	g.Expect(pods[0].Spec.Containers[0].Args).To(Equal([]string{"serve", "--debug", "--v=4"}))
}
