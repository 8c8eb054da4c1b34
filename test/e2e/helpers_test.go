//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/e2e/poll"
)

// namespace makes a restricted namespace with the deployer ServiceAccount;
// it is deleted after the test unless the test failed (to look at).
func namespace(t *testing.T, prefix string) string {
	t.Helper()
	c := need(t)
	name := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1e6)
	NewWithT(t).Expect(c.PrepareNamespace(context.Background(), name)).To(Succeed())
	t.Cleanup(func() {
		if t.Failed() {
			logNamespace(t, name)
			t.Logf("keeping namespace %s to look at", name)
			return
		}
		_ = c.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	return name
}

// sampleIn is config/samples/dev's environment moved to namespace ns: its
// registry prefix and source repository under ns.
func sampleIn(t *testing.T, ns string) *v1alpha1.DevEnvironment {
	t.Helper()
	env, err := need(t).Sample()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	env.Namespace = ns
	env.Spec.Registry.Prefix = registry + "/" + ns
	env.Spec.Sources[0].OCI.Repository = registry + "/" + ns + "/src"
	return env
}

// copyDir copies a source tree to a fresh temporary directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if d.Type()&os.ModeSymlink != 0 {
			// Kept a link (Volcano's chart links crd/v1 to crd/bases).
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, _ := d.Info()
		return os.WriteFile(target, data, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// setGreeting rewrites the sample service's greeting in a copied tree.
func setGreeting(t *testing.T, dir, greeting string) {
	t.Helper()
	path := filepath.Join(dir, "cmd", "web", "main.go")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "const greeting = ") {
			lines[i] = fmt.Sprintf("const greeting = %q", greeting)
		}
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
}

func requestReconcile(t *testing.T, env *v1alpha1.DevEnvironment) string {
	t.Helper()
	c := need(t)
	value := fmt.Sprint(time.Now().UnixNano())
	key := client.ObjectKeyFromObject(env)
	waitFor(t, poll.Wait{What: "reconcile request on " + key.String(), Every: 10 * time.Millisecond, Within: time.Minute},
		poll.Succeeds(func(ctx context.Context) error {
			cur := &v1alpha1.DevEnvironment{}
			if err := c.Client.Get(ctx, key, cur); err != nil {
				return err
			}
			patch := client.MergeFrom(cur.DeepCopy())
			if cur.Annotations == nil {
				cur.Annotations = map[string]string{}
			}
			cur.Annotations[v1alpha1.ReconcileRequestAnnotation] = value
			return c.Client.Patch(ctx, cur, patch)
		}))
	return value
}

func readyNow(g Gomega, env *v1alpha1.DevEnvironment) {
	g.Expect(env.Status.ObservedGeneration).To(Equal(env.Generation))
	ready := meta.FindStatusCondition(env.Status.Conditions, v1alpha1.ConditionReady)
	g.Expect(ready).NotTo(BeNil())
	g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "Ready: %s", ready.Message)
}

// imageOf is the status of image name.
func imageOf(env *v1alpha1.DevEnvironment, name string) *v1alpha1.ImageStatus {
	_, ist := env.BuiltImage(name)
	return ist
}

func componentOf(env *v1alpha1.DevEnvironment, name string) *v1alpha1.ComponentStatus {
	return env.Status.Component(name)
}

// webLabels select the sample service's pods (release hello).
var webLabels = map[string]string{"app.kubernetes.io/name": "web", "app.kubernetes.io/instance": "hello"}

func createServiceAccount(ctx context.Context, ns, name string) error {
	return dc.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
}

func intstrHTTP() intstr.IntOrString { return intstr.FromString("http") }
