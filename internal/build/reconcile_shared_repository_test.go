package build_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// sharedRepoEnv is WebEnv in a namespace of its own, pushing to the
// repository prefix shared, its image opted in to sharing or not.
func sharedRepoEnv(t *testing.T, shared, binary string, optIn bool) *v1alpha1.DevEnvironment {
	t.Helper()
	ns := operatortest.Namespace(t)
	operatortest.AppFiles(t, ns, operatortest.WebFiles(binary))
	env := operatortest.WebEnv(ns)
	env.Spec.Registry.Prefix = shared
	env.Spec.Components[0].Manifests = nil
	env.Spec.Components[0].Images[0].SharedRepository = optIn
	return env
}

// reconcileAgain asks for a reconcile and waits until the operator
// handled it with the environment Ready: one more look at the registry
// (the tests verify pushed images on every reconcile).
func reconcileAgain(t *testing.T, env *v1alpha1.DevEnvironment) *v1alpha1.DevEnvironment {
	t.Helper()
	request := operatortest.RequestReconcile(t, env)
	return operatortest.WaitForEnv(t, client.ObjectKeyFromObject(env), func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.LastHandledReconcileAt).To(Equal(request))
		operatortest.ExpectReadyAndCurrent(g, env)
	})
}

// TestSharedRepositoryRevisionTagPushedOncePerContent: two environments
// of two namespaces, both opted in, build the same source revision into
// one repository. Their images differ only by the source's origin (so
// their digests differ) and the revision tag is the same: it is pushed
// once, by whoever built first, and not moved back and forth however often
// either reconciles. Once one environment's content changes it moves the
// tag once, and again neither moves it back.
func TestSharedRepositoryRevisionTagPushedOncePerContent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	shared := operatortest.Registry.Host + "/shared-" + operatortest.Namespace(t)
	repo := strings.TrimPrefix(shared, operatortest.Registry.Host+"/") + "/web"

	first := sharedRepoEnv(t, shared, "one binary", true)
	g.Expect(operatortest.Admin.Create(ctx, first)).To(Succeed())
	first = operatortest.WaitForEnv(t, client.ObjectKeyFromObject(first), operatortest.ExpectReadyAndCurrent)
	revTag := first.Status.Component("web").Image("web").RevisionTag
	g.Expect(revTag).NotTo(BeEmpty())

	second := sharedRepoEnv(t, shared, "one binary", true)
	g.Expect(operatortest.Admin.Create(ctx, second)).To(Succeed())
	second = operatortest.WaitForEnv(t, client.ObjectKeyFromObject(second), operatortest.ExpectReadyAndCurrent)
	g.Expect(second.Status.Component("web").Image("web").RevisionTag).To(Equal(revTag), "one revision, one tag")
	g.Expect(second.Status.Component("web").Image("web").Digest).NotTo(Equal(first.Status.Component("web").Image("web").Digest),
		"the images name their own source's origin")

	// Both look at the registry again and again: nobody moves the tag.
	for range 3 {
		first = reconcileAgain(t, first)
		second = reconcileAgain(t, second)
	}
	g.Expect(operatortest.Registry.TagPuts(repo, revTag)).To(Equal(1), "the revision tag was pushed once for one content")
	g.Expect(operatortest.Registry.TagDigest(t, repo, revTag)).To(Equal(first.Status.Component("web").Image("web").Digest))

	// The second's content changes (not its revision): it moves the tag,
	// once, and the first does not take it back.
	operatortest.EditSpec(t, client.ObjectKeyFromObject(second), func(env *v1alpha1.DevEnvironment) {
		env.Spec.Components[0].Images[0].Entrypoint = []string{"/web", "--changed"}
	})
	second = operatortest.WaitForEnv(t, client.ObjectKeyFromObject(second), func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.Component("web").Image("web").Inputs).NotTo(Equal(first.Status.Component("web").Image("web").Inputs))
	})
	g.Expect(second.Status.Component("web").Image("web").RevisionTag).To(Equal(revTag))
	for range 3 {
		first = reconcileAgain(t, first)
		second = reconcileAgain(t, second)
	}
	g.Expect(operatortest.Registry.TagPuts(repo, revTag)).To(Equal(2), "one push per content")
	g.Expect(operatortest.Registry.TagDigest(t, repo, revTag)).To(Equal(second.Status.Component("web").Image("web").Digest))
	operatortest.ExpectKstatus(t, first, status.CurrentStatus)
	operatortest.ExpectKstatus(t, second, status.CurrentStatus)
}

// TestSharedRepositoryNeverTakesATagFromOneThatDidNotOptIn: an
// environment opted in to sharing may not move a tag that an environment
// which did not opt in pushed. It stalls naming that environment, the
// repository and the two ways out, and the other's tag never moves.
func TestSharedRepositoryNeverTakesATagFromOneThatDidNotOptIn(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	shared := operatortest.Registry.Host + "/shared-" + operatortest.Namespace(t)
	repo := strings.TrimPrefix(shared, operatortest.Registry.Host+"/") + "/web"

	owner := sharedRepoEnv(t, shared, "one binary", false)
	g.Expect(operatortest.Admin.Create(ctx, owner)).To(Succeed())
	owner = operatortest.WaitForEnv(t, client.ObjectKeyFromObject(owner), operatortest.ExpectReadyAndCurrent)
	built := *owner.Status.Component("web").Image("web")

	taker := sharedRepoEnv(t, shared, "one binary", true)
	g.Expect(operatortest.Admin.Create(ctx, taker)).To(Succeed())
	taker = operatortest.WaitForStalled(t, client.ObjectKeyFromObject(taker), v1alpha1.ReasonTagMoved,
		"tag "+built.RevisionTag, owner.Namespace+"/"+owner.Name, built.Repository, "spec.registry.prefix", "sharedRepository: true")
	operatortest.ExpectKstatus(t, taker, status.FailedStatus)

	for range 3 {
		owner = reconcileAgain(t, owner)
		_ = operatortest.RequestReconcile(t, taker)
	}
	g.Expect(*owner.Status.Component("web").Image("web")).To(Equal(built))
	g.Expect(operatortest.Registry.TagDigest(t, repo, built.RevisionTag)).To(Equal(built.Digest))
	g.Expect(operatortest.Registry.TagPuts(repo, built.RevisionTag)).To(Equal(1))
	operatortest.ExpectKstatus(t, owner, status.CurrentStatus)
}
