package crd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// statusBounds are the status's free text: the schema's maxLength at each
// path must be the bound v1alpha1's Bound cuts to.
var statusBounds = map[string]int{
	"lastHandledTrigger":                  v1alpha1.MaxLastHandledTrigger,
	"lastTestResult":                      v1alpha1.MaxLastTestResult,
	"sources[].revision":                  v1alpha1.MaxSourceRevision,
	"components[].message":                v1alpha1.MaxComponentMessage,
	"components[].drift[]":                v1alpha1.MaxDriftLine,
	"components[].images[].updateReason":  v1alpha1.MaxUpdateReason,
	"components[].images[].build.logTail": v1alpha1.MaxBuildLogTail,
	"tests[].message":                     v1alpha1.MaxTestMessage,
	"tests[].runs[].trigger":              v1alpha1.MaxRunTrigger,
	"tests[].runs[].message":              v1alpha1.MaxRunMessage,
	"tests[].runs[].logTail":              v1alpha1.MaxRunLogTail,
}

func TestStatusBoundsMatchTheSchema(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "devloop.dev_devenvironments.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(yaml.Unmarshal(data, crd)).To(Succeed())
	status := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"]
	for path, want := range statusBounds {
		s := status
		for _, part := range strings.Split(path, ".") {
			name, list := strings.CutSuffix(part, "[]")
			s = s.Properties[name]
			if list {
				s = *s.Items.Schema
			}
		}
		g.Expect(s.MaxLength).NotTo(BeNil(), "status.%s has no maxLength", path)
		g.Expect(int(*s.MaxLength)).To(Equal(want), "status.%s: the schema and the code's bound differ", path)
	}
	drift := status.Properties["components"].Items.Schema.Properties["drift"]
	g.Expect(int(*drift.MaxItems)).To(Equal(v1alpha1.MaxDriftLines))
}

// TestBoundedStatusIsAccepted writes a status whose free text is far over
// its bounds: the API server refuses it as it is, and takes it once Bound
// has cut it, so no status writer's long message stops a reconcile.
func TestBoundedStatusIsAccepted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	env := validEnv()
	env.Name = "bounded-status"
	g.Expect(k8s.Create(ctx, env)).To(Succeed())
	t.Cleanup(func() { _ = k8s.Delete(ctx, env) })

	long := strings.Repeat("é", 5000)
	now := metav1.Now()
	env.Status = v1alpha1.DevEnvironmentStatus{
		LastHandledTrigger: long, LastTestResult: "unit-tests: Passed",
		Sources: []v1alpha1.SourceStatus{{Name: "app", Revision: long, Digest: "sha256:abc"}},
		Components: []v1alpha1.ComponentStatus{{Name: "operator", Phase: v1alpha1.PhaseFailed, Message: long,
			Drift: []string{long},
			Images: []v1alpha1.ImageStatus{{Name: "controller", UpdateReason: long,
				Build: &v1alpha1.BuildStatus{Job: "operator-controller-1", Result: v1alpha1.BuildFailed, LogTail: long}}}}},
		Tests: []v1alpha1.TestStatus{{Name: "unit-tests", Message: long, Runs: []v1alpha1.TestRun{{
			Number: 1, Trigger: long, Result: v1alpha1.ResultFailed, StartTime: &now, Message: long, LogTail: long,
			Images: map[string]string{"controller": "sha256:" + strings.Repeat("d", 64)}}}}},
	}
	over := env.DeepCopy()
	g.Expect(k8s.Status().Update(ctx, over)).NotTo(Succeed(), "the schema bounds the status's free text")
	env.Status.Bound()
	g.Expect(k8s.Status().Update(ctx, env)).To(Succeed())
}
