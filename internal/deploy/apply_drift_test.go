package deploy

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestDriftFindsHandEditsAndApplyCorrectsThem(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createNamespace(t, "drift")
	objs, err := Render(testdata, []string{"kustomize/overlay"}, "drift", k8s.RESTMapper())
	g.Expect(err).NotTo(HaveOccurred())
	cm := fromYAML(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: drift}\ndata: {a: b}\n")
	objs = append(objs, cm)
	opts := ApplyOptions{Environment: "drift-env", Component: "api"}
	_, err = Apply(ctx, k8s, objs, opts)
	g.Expect(err).NotTo(HaveOccurred())

	drifted, err := Drift(ctx, k8s, objs, opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(drifted).To(BeEmpty(), "nothing changed since the apply")

	// Someone scales by hand and deletes the ConfigMap.
	d := &appsv1.Deployment{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "drift", Name: "api"}, d)).To(Succeed())
	d.Spec.Replicas = ptr(int32(7))
	g.Expect(k8s.Update(ctx, d, client.FieldOwner("kubectl-edit"))).To(Succeed())
	g.Expect(k8s.Delete(ctx, cm.DeepCopy())).To(Succeed())

	drifted, err = Drift(ctx, k8s, objs, opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(drifted).To(ConsistOf(
		"deployments.apps/api: spec.replicas changed by hand",
		"configmaps/settings: deleted by hand",
	))
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
	g.Expect(*d.Spec.Replicas).To(BeEquivalentTo(7), "a dry run writes nothing")

	_, err = Apply(ctx, k8s, objs, opts)
	g.Expect(err).NotTo(HaveOccurred())
	drifted, err = Drift(ctx, k8s, objs, opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(drifted).To(BeEmpty())
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
	g.Expect(*d.Spec.Replicas).To(BeEquivalentTo(3))
}
