//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	. "github.com/devloop-dev/devloop/test/builder"
	. "github.com/devloop-dev/devloop/test/e2e/fixture"
	"github.com/devloop-dev/devloop/test/e2e/poll"
)

// A server that keeps running, so the Deployment has a pod to keep or
// replace.
const sleeperMain = `package main

import (
	"fmt"
	"time"
)

func main() {
	fmt.Println("up")
	for {
		time.Sleep(time.Hour)
	}
}
`

// sleeperDeployment names the image as a chart would, org/name, unpinned;
// devloop pins it to the built digest.
var sleeperDeployment = Deployment("sleeper", "sleeper", "image: tools/sleeper:latest")

// TestUnchangedBinaryKeepsItsDigest is issue 18's items 8 and 9 on a real
// cluster: an image named org/name with a run step builds (its name goes
// into labels and claim names encoded), and a push that changes only a file
// the binary does not use compiles again but yields a byte-identical
// binary, hence the same image digest, and nothing rolls out.
func TestUnchangedBinaryKeepsItsDigest(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := need(t)
	ns := namespace(t, "e2e-same")
	dir := sourceDir(t, Files{
		"go.mod":              GoModule("example.com/sleeper"),
		"main.go":             sleeperMain,
		"NOTES.md":            "first\n",
		"deploy/sleeper.yaml": sleeperDeployment,
	})
	build := GoBuild(goImage, []string{"go", "build", "-trimpath", "-o", "out/sleeper", "."}, GoPath)
	build.Cache = &v1alpha1.BuildCache{}
	env := newEnv(ns, "same").Registry().Components(Component("sleeper",
		Images(Image("tools/sleeper", Base(busybox), Run(build), Program("out/sleeper", "/sleeper"))), Manifests("deploy"))).Build()
	pushOnly(t, env, dir)
	g.Expect(c.Client.Create(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	first := waitEnv(t, key, 6*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyNow(g, env)
		g.Expect(imageOf(env, "tools/sleeper")).NotTo(BeNil())
	})
	img := *imageOf(first, "tools/sleeper")
	g.Expect(img.Build).NotTo(BeNil())
	t.Logf("built tools/sleeper %s@%s by %s, inputs %s", img.Repository, img.Digest, img.Build.Job, img.Inputs)

	dep := &appsv1.Deployment{}
	g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "sleeper"}, dep)).To(Succeed())
	g.Expect(dep.Spec.Template.Spec.Containers[0].Image).To(Equal(img.Repository + "@" + img.Digest))
	generation := dep.Generation
	var pods []string
	waitPods(t, poll.Wait{What: "one Ready sleeper pod", Every: 500 * time.Millisecond, Within: 2 * time.Minute},
		ns, map[string]string{"app": "sleeper"}, func(g Gomega, all []corev1.Pod) {
			pods = nil
			for _, p := range poll.Ready(all) {
				pods = append(pods, p.Name)
			}
			g.Expect(pods).To(HaveLen(1))
		})

	// An unrelated change: the source digest moves, the image compiles
	// again, the binary does not change.
	appendToFile(t, filepath.Join(dir, "NOTES.md"), "second\n")
	push(t, env, dir)
	second := waitEnv(t, key, 6*time.Minute, false, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyNow(g, env)
		now := imageOf(env, "tools/sleeper")
		g.Expect(now).NotTo(BeNil())
		g.Expect(now.Inputs).NotTo(Equal(img.Inputs), "the push changed the image's inputs: it must compile again")
		g.Expect(now.Build).NotTo(BeNil())
		g.Expect(now.Build.Result).To(Equal(v1alpha1.BuildSucceeded))
	})
	again := imageOf(second, "tools/sleeper")
	t.Logf("rebuilt tools/sleeper by %s (inputs %s): digest %s", again.Build.Job, again.Inputs, again.Digest)
	g.Expect(again.Revision).NotTo(Equal(img.Revision), "status keeps the new revision")
	g.Expect(again.Digest).To(Equal(img.Digest), "a byte-identical binary is the same image")

	g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "sleeper"}, dep)).To(Succeed())
	g.Expect(dep.Generation).To(Equal(generation), "nothing rolled out")
	g.Expect(readyPodNames(t, ns, map[string]string{"app": "sleeper"})).To(Equal(pods), "the same pod still runs")
}
