package controllers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/controllers"
	"github.com/devloop-dev/devloop/internal/testrun"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// benchManifests is how many manifests components the bench environment
// has, besides its one Helm component.
const benchManifests = 10

// benchEnv brings an environment of benchManifests manifests components
// (a ConfigMap and a Deployment each) and one Helm component ("site", the
// web chart, its image built in process) to Ready through the suite's
// manager, then returns a second reconciler with the suite's options whose
// Reconcile the benchmark calls directly. The environment is then
// suspended for the manager, so only the bench reconciler works on it
// (see requestingClient); its sources are resolved again only on request.
func benchEnv(b *testing.B) (*controllers.DevEnvironmentReconciler, *requestingClient, ctrl.Request, string) {
	b.Helper()
	ns := operatortest.DeployNamespace(b)
	cfg := map[string]string{}
	for i := range benchManifests {
		name := fmt.Sprintf("c%d", i)
		cfg[name+"/config.yaml"] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {a: b}\n", name)
		cfg[name+"/deployment.yaml"] = fmt.Sprintf(`apiVersion: apps/v1
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
	operatortest.Registry.PushSource(b, ns+"/cfg", "dev", cfg)
	operatortest.AppFiles(b, ns, benchAppSource(b, 0))

	hour := &metav1.Duration{Duration: time.Hour}
	env := operatortest.AsDeployer(operatortest.WebEnv(ns))
	env.Spec.Sources[0].Interval = hour
	cfgSource := builder.OCISource("cfg", operatortest.Registry.Host+"/"+ns+"/cfg", "dev")
	cfgSource.Interval = hour
	env.Spec.Sources = append(env.Spec.Sources, cfgSource)
	site := &env.Spec.Components[0]
	site.Name = "site"
	site.Manifests = nil
	site.Helm = &v1alpha1.HelmSpec{Chart: v1alpha1.ChartRef{Source: "app", Path: "chart"}, ReleaseName: "site"}
	for i := range benchManifests {
		name := fmt.Sprintf("c%d", i)
		env.Spec.Components = append(env.Spec.Components, v1alpha1.Component{Name: name,
			Manifests: &v1alpha1.ManifestsSpec{Source: "cfg", Paths: []string{name}}})
	}
	g := NewWithT(b)
	g.Expect(operatortest.Admin.Create(context.Background(), env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	operatortest.WaitForEnv(b, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.Components).To(HaveLen(benchManifests + 1))
		for _, c := range env.Status.Components {
			g.Expect(c.Phase).To(Equal(v1alpha1.PhaseDeploying), "%s: %s", c.Name, c.Message)
		}
	})
	operatortest.MarkDeploymentAvailable(b, ns, "site")
	for i := range benchManifests {
		operatortest.MarkDeploymentAvailable(b, ns, fmt.Sprintf("c%d", i))
	}
	operatortest.WaitForEnv(b, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.ComponentsReady).To(Equal(fmt.Sprintf("%d/%d", benchManifests+1, benchManifests+1)))
	})
	// The suite's options (an image verify interval of 1ns) requeue a
	// Ready environment every second. The manager is kept off it by
	// suspending it; the bench reconciler reads it unsuspended.
	cur := &v1alpha1.DevEnvironment{}
	g.Expect(operatortest.Admin.Get(context.Background(), key, cur)).To(Succeed())
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.Suspend = true
	g.Expect(operatortest.Admin.Patch(context.Background(), cur, patch)).To(Succeed())
	operatortest.WaitForEnv(b, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.ObservedGeneration).To(Equal(env.Generation))
	})
	time.Sleep(2 * time.Second) // a requeue in flight has run and stopped

	s := operatortest.Reconciler
	cl := &requestingClient{Client: s.Client}
	// The suite's engines, but the test runs' writes go through cl too.
	engines := s.Engines
	tests := *engines.Tests.(*testrun.Engine)
	tests.Client = cl
	engines.Tests, engines.Triggers = &tests, testrun.Triggers{Engine: &tests}
	// The suite's reconciler (controllers.New), its client counting.
	r := new(controllers.DevEnvironmentReconciler)
	*r = *s
	r.Client, r.Engines = cl, engines
	req := ctrl.Request{NamespacedName: key}
	// Warm up: the bench reconciler resolves the sources once.
	_, err := r.Reconcile(context.Background(), req)
	g.Expect(err).NotTo(HaveOccurred())
	operatortest.WaitForEnv(b, key, operatortest.ExpectReadyAndCurrent)
	return r, cl, req, ns
}

// benchAppSource is the web binary, static files and chart, the binary
// differing by n.
func benchAppSource(b *testing.B, n int) map[string]string {
	files := operatortest.WebFiles(fmt.Sprintf("binary %d", n))
	for k, v := range operatortest.ChartFiles(b, "web", "chart") {
		files[k] = v
	}
	return files
}

// requestingClient reads DevEnvironments unsuspended and with the
// reconcile-request annotation set to request, as if `kubectl devloop push`
// had set it, without writing either: that would wake the suite's manager,
// which would reconcile the same environment concurrently.
type requestingClient struct {
	client.Client
	request string
}

func (c *requestingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	env, ok := obj.(*v1alpha1.DevEnvironment)
	if !ok {
		return nil
	}
	env.Spec.Suspend = false
	if c.request != "" {
		if env.Annotations == nil {
			env.Annotations = map[string]string{}
		}
		env.Annotations[v1alpha1.ReconcileRequestAnnotation] = c.request
	}
	return nil
}

// BenchmarkReconcileNoop is one Reconcile of a Ready environment of 11
// components with nothing changed: sources reused, images checked in the
// registry, each component's objects read (one LIST per namespace and
// kind) and checked Current against what was last applied, nothing
// applied, the release not handed to Helm.
func BenchmarkReconcileNoop(b *testing.B) {
	r, _, req, _ := benchEnv(b)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		if _, err := r.Reconcile(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/op")
}

// BenchmarkReconcileImageChange is the time from pushing a source with one
// file of the web image changed to the Helm release upgraded with the new
// image digest: a requested reconcile resolves the source, builds and
// pushes the image in process and upgrades the release.
func BenchmarkReconcileImageChange(b *testing.B) {
	r, cl, req, ns := benchEnv(b)
	ctx := context.Background()
	g := NewWithT(b)
	env := &v1alpha1.DevEnvironment{}
	g.Expect(operatortest.Admin.Get(ctx, req.NamespacedName, env)).To(Succeed())
	digest := env.Status.Component("site").Image("web").Digest
	reconciles := 0
	n := 0
	b.ResetTimer()
	for b.Loop() {
		n++
		operatortest.AppFiles(b, ns, benchAppSource(b, n))
		cl.request = fmt.Sprintf("bench-%d", n)
		for {
			reconciles++
			if _, err := r.Reconcile(ctx, req); err != nil {
				b.Fatal(err)
			}
			g.Expect(cl.Client.Get(ctx, req.NamespacedName, env)).To(Succeed())
			img := env.Status.Component("site").Image("web")
			if img == nil || img.Digest == digest {
				continue
			}
			d := &appsv1.Deployment{}
			g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "site"}, d)).To(Succeed())
			if d.Spec.Template.Spec.Containers[0].Image == env.Spec.Registry.Prefix+"/web@"+img.Digest {
				digest = img.Digest
				break
			}
		}
		b.StopTimer()
		operatortest.MarkDeploymentAvailable(b, ns, "site")
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/op")
	b.ReportMetric(float64(reconciles)/float64(b.N), "reconciles/op")
}
