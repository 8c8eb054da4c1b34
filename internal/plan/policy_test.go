package plan

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

func TestPolicyRefusesCrossNamespaceSourcesNamingTheField(t *testing.T) {
	env := &v1alpha1.DevEnvironment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "dev"}}
	env.Spec.Sources = []v1alpha1.Source{
		{Name: "same", SourceRef: &v1alpha1.FluxSourceReference{Kind: "GitRepository", Name: "app", Namespace: "team-a"}},
		{Name: "other", SourceRef: &v1alpha1.FluxSourceReference{Kind: "GitRepository", Name: "app", Namespace: "team-b"}},
	}
	if err := (Policy{}).Check(env); err != nil {
		t.Fatalf("no policy refused %v", err)
	}
	err := Policy{NoCrossNamespaceRefs: true}.Check(env)
	if err == nil || !strings.HasPrefix(err.Error(), `spec.sources[1].sourceRef.namespace: "team-b"`) {
		t.Fatalf("cross-namespace reference: %v", err)
	}
	env.Spec.Sources = env.Spec.Sources[:1]
	if err := (Policy{NoCrossNamespaceRefs: true}).Check(env); err != nil {
		t.Fatalf("a reference to its own namespace refused: %v", err)
	}
}
