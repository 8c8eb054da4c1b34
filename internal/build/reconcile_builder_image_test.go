package build_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/test/operatortest"
)

// tagRandom pushes a random image to the registry under ref (a tag) and
// returns its digest: a builder image, or that tag moved.
func tagRandom(g Gomega, ref string) v1.Hash {
	img, err := random.Image(256, 1)
	g.Expect(err).NotTo(HaveOccurred())
	tag, err := name.NewTag(ref, name.Insecure)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(remote.Write(tag, img)).To(Succeed())
	d, err := img.Digest()
	g.Expect(err).NotTo(HaveOccurred())
	return d
}

// TestBuilderImageTagIsPinned (issue 34 item 4): a run.image given by a
// tag runs by the digest the tag names (tag@digest), an event says which;
// the tag moved to another image is a new input: a new builder Job runs
// the new digest.
func TestBuilderImageTagIsPinned(t *testing.T) {
	g := NewWithT(t)
	ns, _ := apiNamespace(t)
	builder := fmt.Sprintf("%s/%s/builder:1.25", operatortest.Registry.Host, ns)
	first := tagRandom(g, builder)
	env := amd64APIEnv(ns)
	env.Spec.Components[0].Images[0].Run.Image = builder
	key := operatortest.CreateEnv(t, env)

	job := operatortest.WaitForBuilderJob(t, ns, "linux-amd64")
	g.Expect(buildContainer(job).Image).To(Equal(builder+"@"+first.String()), "the tag's digest, not the tag")
	g.Eventually(func(g Gomega) {
		events := &eventsv1.EventList{}
		g.Expect(operatortest.Admin.List(context.Background(), events, client.InNamespace(ns))).To(Succeed())
		var notes []string
		for _, e := range events.Items {
			if e.Reason == "BuilderImagePinned" && e.Type == corev1.EventTypeNormal {
				notes = append(notes, e.Note)
			}
		}
		g.Expect(notes).To(ContainElement(ContainSubstring(first.String())))
	}, operatortest.Timeout).Should(Succeed())

	// The tag moves: the next look builds again, in the new image.
	second := tagRandom(g, builder)
	g.Expect(second).NotTo(Equal(first))
	operatortest.RequestReconcile(t, env)
	var moved batchv1.Job
	g.Eventually(func(g Gomega) {
		moved = operatortest.BuilderJobs(g, ns)["linux-amd64"]
		g.Expect(moved.Name).NotTo(BeEmpty())
		g.Expect(moved.Name).NotTo(Equal(job.Name), "a new input, a new Job")
	}, operatortest.Timeout).Should(Succeed())
	g.Expect(buildContainer(moved).Image).To(Equal(builder + "@" + second.String()))
	_ = key
}
