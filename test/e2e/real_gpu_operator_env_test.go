//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// gpuOperatorModule is the real tree of USE-CASES.md #1 as the Go module
// proxy serves it: the chart, assets, CRDs and validator are in its zip.
const gpuOperatorModule = "github.com/NVIDIA/gpu-operator@v0.0.0-20250917190837-d73a0086a6ba"

// gpuOperatorTree downloads the module (through the host's module cache,
// as `go mod download` does) and copies it to a writable directory: the
// tree a developer would push. Its dependencies are downloaded too, for
// hostGoProxy.
func gpuOperatorTree(t *testing.T) string {
	t.Helper()
	dl := exec.Command("go", "mod", "download", "-json", gpuOperatorModule)
	dl.Env = append(os.Environ(), "GOFLAGS=", "GOTOOLCHAIN=local")
	out, err := dl.Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v\n%s", gpuOperatorModule, err, out)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download -json %s: %v\n%s", gpuOperatorModule, err, out)
	}
	dir := copyDir(t, mod.Dir)
	// The module cache's files are read-only; the tree is edited.
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return os.Chmod(p, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// gpuOperatorSample reads config/samples/gpu-operator.yaml, the file a team
// copies: the test runs it, changing only what this cluster differs in.
func gpuOperatorSample(t *testing.T) *v1alpha1.DevEnvironment {
	t.Helper()
	env := readSample(t, "gpu-operator.yaml")
	return env
}

// localGPUOperator is the sample on the local cluster: the source is the
// pushed tree (no Git remote here), images go to the cluster's registry
// under ns, bases and builder are the cluster's (nodes pull from no
// public registry), modules come from the host (goproxy), the release goes
// to releaseNS (privileged: the operator's DaemonSets mount host paths),
// and the chart leaves out what pulls public images this node cannot
// reach (node feature discovery: the test labels the node itself).
func localGPUOperator(t *testing.T, ns, releaseNS, goproxy string) *v1alpha1.DevEnvironment {
	t.Helper()
	env := gpuOperatorSample(t)
	env.Namespace = ns
	env.Spec.ServiceAccountName = "deployer"
	env.Spec.Registry = &v1alpha1.RegistrySpec{Prefix: registry + "/" + ns, Insecure: true}
	env.Spec.Sources[0] = v1alpha1.Source{Name: env.Spec.Sources[0].Name,
		OCI: &v1alpha1.OCISource{Repository: registry + "/" + ns + "/src", Tag: "dev", Insecure: true}}
	goEnv := []v1alpha1.EnvVar{{Name: "GOPATH", Value: "/go"}, {Name: "GOPROXY", Value: goproxy},
		{Name: "GOSUMDB", Value: "off"}, {Name: "GOTOOLCHAIN", Value: "local"}}
	op := &env.Spec.Components[1]
	for i := range op.Images {
		img := &op.Images[i]
		img.Base = busybox
		img.Run.Image = goImage
		img.Run.Env = append(img.Run.Env, goEnv...)
	}
	op.Helm.Namespace = releaseNS
	op.Helm.CreateNamespace = false
	var values map[string]any
	NewWithT(t).Expect(json.Unmarshal(op.Helm.Values.Raw, &values)).To(Succeed())
	values["nfd"] = map[string]any{"enabled": false}
	// No driver to install here: without node feature discovery's kernel
	// labels the operator's state-driver fails ("Could not find kernel full
	// version") and the operator stops before its validator state.
	values["driver"] = map[string]any{"enabled": false}
	raw, err := json.Marshal(values)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	op.Helm.Values = &apiextensionsv1.JSON{Raw: raw}
	suite := &env.Spec.Tests[0]
	suite.Image = v1alpha1.TestImage{Ref: goImage}
	// The suite's module cache is on its cache volume (GOMODCACHE under
	// the suite's cache), so no GOPATH here.
	suite.Env = append(suite.Env, goEnv[1:]...)
	return env
}

// privilegedNamespace makes the release's namespace: the GPU Operator's
// DaemonSets run privileged pods.
func privilegedNamespace(t *testing.T, name string) string {
	t.Helper()
	c := need(t)
	n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}}}
	NewWithT(t).Expect(c.Client.Create(context.Background(), n)).To(Succeed())
	t.Cleanup(func() {
		if !t.Failed() {
			_ = c.Client.Delete(context.Background(), n)
		}
	})
	return name
}

// allowClusterAdmin binds sa to cluster-admin: the chart creates CRDs,
// ClusterRoles and ClusterRoleBindings, and RBAC lets only a holder of
// the rights grant them (the sample says so of its ServiceAccount).
func allowClusterAdmin(t *testing.T, ns, sa string) {
	t.Helper()
	c := need(t)
	b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "cluster-admin-" + ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}}}
	NewWithT(t).Expect(c.Client.Create(context.Background(), b)).To(Succeed())
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), b) })
}

// gpuNodeLabel is what node feature discovery puts on a node with an
// NVIDIA PCI device; the operator then labels the node for its operands.
const gpuNodeLabel = "feature.node.kubernetes.io/pci-10de.present"

// labelGPUNode labels every node as a GPU node, and removes that label
// and those the operator added (nvidia.com/...) when the test ends.
func labelGPUNode(t *testing.T) {
	t.Helper()
	c := need(t)
	ctx := context.Background()
	nodes := &corev1.NodeList{}
	NewWithT(t).Expect(c.Client.List(ctx, nodes)).To(Succeed())
	for i := range nodes.Items {
		n := &nodes.Items[i]
		NewWithT(t).Expect(patchNodeLabels(ctx, n.Name, map[string]any{gpuNodeLabel: "true"})).To(Succeed())
	}
	t.Cleanup(func() {
		for i := range nodes.Items {
			cur := &corev1.Node{}
			if err := c.Client.Get(ctx, client.ObjectKey{Name: nodes.Items[i].Name}, cur); err != nil {
				continue
			}
			drop := map[string]any{}
			for k := range cur.Labels {
				if k == gpuNodeLabel || strings.HasPrefix(k, "nvidia.com/") {
					drop[k] = nil
				}
			}
			_ = patchNodeLabels(ctx, cur.Name, drop)
		}
	})
}

// patchNodeLabels sets (or, with nil, removes) labels of a node by a merge
// patch.
func patchNodeLabels(ctx context.Context, node string, labels map[string]any) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return err
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	if err := dc.Client.Patch(ctx, n, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("labelling node %s: %w", node, err)
	}
	return nil
}

// editOperator changes the operator's start-up log line, an edit whose
// new code shows in the new pod's log.
func editOperator(t *testing.T, dir string, n int) string {
	t.Helper()
	mark := fmt.Sprintf("devloop edit %d", n)
	markLogLine(t, filepath.Join(dir, "cmd", "gpu-operator", "main.go"), `setupLog.Info("starting manager"`, mark)
	return mark
}

// markLogLine rewrites the line of file path that starts with call (a
// log call's opening, `setupLog.Info("msg"`) into that call with one
// key-value more, "edit": mark: an edit whose new code shows in the log.
func markLogLine(t *testing.T, path, call, mark string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(data), call)
	if i < 0 {
		t.Fatalf("%s: no %s to edit", path, call)
	}
	end := i + strings.Index(string(data[i:]), "\n")
	edited := string(data[:i]) + fmt.Sprintf(`%s, "edit", %q)`, call, mark) + string(data[end:])
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
}

var errStillThere = errors.New("still there")

// allowReadEnvironment lets the deployer of ns read first's build cache
// (the verb readcache, teamcache.VerbReadCache), which spec.cache.readFrom
// needs.
func allowReadEnvironment(t *testing.T, first *v1alpha1.DevEnvironment, ns string) {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: first.Namespace, Name: "read-" + first.Name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"devenvironments"},
			ResourceNames: []string{first.Name}, Verbs: []string{"readcache"}}}}
	g.Expect(dc.Client.Create(ctx, role)).To(Succeed())
	g.Expect(dc.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: first.Namespace, Name: "read-" + first.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "deployer"}}})).To(Succeed())
}

// createIgnoringClusterPolicy creates env with its operator component's
// Ready not waiting for the ClusterPolicy (spec.components[].health, the
// field the sample's comment names): without a GPU driver on this node it
// never turns ready.
func createIgnoringClusterPolicy(t *testing.T, env *v1alpha1.DevEnvironment) {
	t.Helper()
	for i := range env.Spec.Components {
		if c := &env.Spec.Components[i]; c.Helm != nil {
			c.Health = &v1alpha1.HealthSpec{Ignore: []v1alpha1.HealthIgnore{{Group: "nvidia.com", Kind: "ClusterPolicy"}}}
		}
	}
	NewWithT(t).Expect(dc.Client.Create(context.Background(), env)).To(Succeed())
}

// initContainerStates says, for each pod, each init container's image ID
// or why it waits (a validator pod runs the image in init containers).
func initContainerStates(pods []corev1.Pod) string {
	var parts []string
	for _, p := range pods {
		for _, s := range p.Status.InitContainerStatuses {
			state := s.ImageID
			if w := s.State.Waiting; w != nil {
				state = w.Reason + ": " + w.Message
			}
			parts = append(parts, p.Name+"/"+s.Name+" "+state)
		}
	}
	if len(parts) == 0 {
		return "no init container started"
	}
	return strings.Join(parts, "; ")
}

// readSample reads config/samples/NAME, a DevEnvironment written for a
// user's cluster, for a case to change only what this cluster differs in.
func readSample(t *testing.T, name string) *v1alpha1.DevEnvironment {
	t.Helper()
	path := filepath.Join(testenv.RepoRoot(), "config", "samples", name)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	env := &v1alpha1.DevEnvironment{}
	if err := yaml.UnmarshalStrict(data, env); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return env
}
