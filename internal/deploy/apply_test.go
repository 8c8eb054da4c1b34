package deploy

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/testenv"
)

var shopOpts = ApplyOptions{Environment: "shop-env", Component: "web"}

// renderPlain renders testdata plain with images rewritten.
func renderPlain(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	g := NewWithT(t)
	objs, err := Render(dir, nil, "shop", k8s.RESTMapper())
	g.Expect(err).NotTo(HaveOccurred())
	n, err := RewriteImages(objs, []BuiltImage{builtAPI})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(1))
	return objs
}

// notReadyOf is what Ready says of refs, which it must read without error.
func notReadyOf(g Gomega, refs []ObjRef) []string {
	notReady, err := Ready(context.Background(), k8s, refs)
	g.Expect(err).NotTo(HaveOccurred())
	return notReady
}

// kstatusOf reads an object and computes its kstatus.
func kstatusOf(g Gomega, ref ObjRef) status.Status {
	o := &unstructured.Unstructured{}
	o.SetGroupVersionKind(ref.GroupVersionKind())
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, o)).To(Succeed())
	res, err := status.Compute(o)
	g.Expect(err).NotTo(HaveOccurred())
	return res.Status
}

func TestApplyPlainDirectory(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	objs := renderPlain(t, testdata+"/plain")

	inv, err := Apply(ctx, k8s, objs, shopOpts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(inv.Entries).To(HaveLen(6))
	g.Expect(objs[0].GetLabels()).NotTo(HaveKey(v1alpha1.LabelEnvironment), "Apply does not modify its input")

	// The workload runs the digest-pinned image; everything carries the labels.
	d := &appsv1.Deployment{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "web"}, d)).To(Succeed())
	g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(apiDigest))
	g.Expect(d.Spec.Template.Spec.Containers[1].Image).To(Equal("nginx:1.27"))
	g.Expect(d.Labels).To(HaveKeyWithValue(v1alpha1.LabelEnvironment, "shop-env"))
	g.Expect(d.Labels).To(HaveKeyWithValue(v1alpha1.LabelComponent, "web"))
	g.Expect(d.ManagedFields).To(ContainElement(HaveField("Manager", FieldManager)))

	// The custom resource was applied once its CRD served it.
	g.Expect(kstatusOf(g, ObjRef{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition", Name: "widgets.example.dev"})).
		To(Equal(status.CurrentStatus), "kstatus calls a CRD Current once Established")
	widget := &unstructured.Unstructured{}
	widget.SetAPIVersion("example.dev/v1")
	widget.SetKind("Widget")
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "big"}, widget)).To(Succeed())
	g.Expect(widget.GetLabels()).To(HaveKeyWithValue(v1alpha1.LabelComponent, "web"))

	// Re-applying the same objects writes nothing.
	before := resourceVersions(g, inv)
	again, err := Apply(ctx, k8s, objs, shopOpts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(inv))
	g.Expect(resourceVersions(g, inv)).To(Equal(before))

	// Readiness: config is Current, the Deployment has no kubelet to run it.
	g.Expect(notReadyOf(g, inv.Entries)).To(ConsistOf(HavePrefix("deployments.apps/web: ")))
	g.Expect(kstatusOf(g, ObjRef{Kind: "ConfigMap", Version: "v1", Namespace: "shop", Name: "web-config"})).To(Equal(status.CurrentStatus))
	g.Expect(kstatusOf(g, ObjRef{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition", Name: "widgets.example.dev"})).To(Equal(status.CurrentStatus))
	g.Expect(kstatusOf(g, ObjRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "shop", Name: "web"})).To(Equal(status.InProgressStatus))
}

func resourceVersions(g Gomega, inv Inventory) map[string]string {
	out := map[string]string{}
	for _, ref := range inv.Entries {
		o := &unstructured.Unstructured{}
		o.SetGroupVersionKind(ref.GroupVersionKind())
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, o)).To(Succeed())
		out[ref.String()] = o.GetResourceVersion()
	}
	return out
}

func TestApplyKustomizeOverlay(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createNamespace(t, "kustomized")
	objs, err := Render(testdata, []string{"kustomize/overlay"}, "kustomized", k8s.RESTMapper())
	g.Expect(err).NotTo(HaveOccurred())
	_, err = RewriteImages(objs, []BuiltImage{builtAPI})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = Apply(ctx, k8s, objs, ApplyOptions{Environment: "k-env", Component: "api"})
	g.Expect(err).NotTo(HaveOccurred())

	d := &appsv1.Deployment{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "kustomized", Name: "api"}, d)).To(Succeed())
	g.Expect(*d.Spec.Replicas).To(BeEquivalentTo(3))
	g.Expect(d.Labels).To(HaveKeyWithValue("tier", "backend"))
	g.Expect(d.Labels).To(HaveKeyWithValue(v1alpha1.LabelEnvironment, "k-env"))
	g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(apiDigest))
	g.Expect(kstatusOf(g, RefOf(objs[0]))).To(Equal(status.InProgressStatus))
}

func TestApplyForbiddenNamesVerbResourceNamespaceAndUser(t *testing.T) {
	g := NewWithT(t)
	createNamespace(t, "no-rbac")
	sa := &corev1.ServiceAccount{}
	sa.Name, sa.Namespace = "deployer", "no-rbac"
	g.Expect(k8s.Create(context.Background(), sa)).To(Succeed())

	cm := &unstructured.Unstructured{}
	cm.SetAPIVersion("v1")
	cm.SetKind("ConfigMap")
	cm.SetNamespace("no-rbac")
	cm.SetName("settings")
	_, err := Apply(context.Background(), impersonating(t, "no-rbac", "deployer"), []*unstructured.Unstructured{cm}, shopOpts)
	g.Expect(err).To(MatchError(HavePrefix("forbidden: cannot patch configmaps in namespace no-rbac as system:serviceaccount:no-rbac:deployer")))
	g.Expect(fault.IsPermanent(err)).To(BeTrue())
}

func TestApplyUnreachableServerIsUnavailable(t *testing.T) {
	g := NewWithT(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	addr := l.Addr().String()
	g.Expect(l.Close()).To(Succeed()) // nothing listens there now

	c, err := client.New(&rest.Config{Host: "http://" + addr, Timeout: 2 * time.Second}, client.Options{Scheme: testenv.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	cm := &unstructured.Unstructured{}
	cm.SetAPIVersion("v1")
	cm.SetKind("ConfigMap")
	cm.SetNamespace("x")
	cm.SetName("y")
	_, err = Apply(context.Background(), c, []*unstructured.Unstructured{cm}, shopOpts)
	g.Expect(err).To(HaveOccurred())
	g.Expect(fault.IsUnavailable(err)).To(BeTrue(), "%v", err)
}

func TestApplyRefusesInvalidLabelValues(t *testing.T) {
	g := NewWithT(t)
	_, err := Apply(context.Background(), k8s, nil, ApplyOptions{Environment: "team-a/shop", Component: "web"})
	g.Expect(fault.IsPermanent(err)).To(BeTrue())
}
