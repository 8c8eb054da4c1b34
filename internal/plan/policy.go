package plan

import (
	"fmt"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// Policy is what the operator's flags forbid in any environment's spec.
type Policy struct {
	// NoCrossNamespaceRefs refuses references to other namespaces
	// (--no-cross-namespace-refs).
	NoCrossNamespaceRefs bool
}

// Check reports the first field of env's spec the policy forbids, naming
// it.
func (p Policy) Check(env *v1alpha1.DevEnvironment) error {
	if !p.NoCrossNamespaceRefs {
		return nil
	}
	for i, src := range env.Spec.Sources {
		if src.SourceRef != nil && src.SourceRef.Namespace != "" && src.SourceRef.Namespace != env.Namespace {
			return fmt.Errorf("spec.sources[%d].sourceRef.namespace: %q is another namespace, and this operator refuses cross-namespace references (--no-cross-namespace-refs)", i, src.SourceRef.Namespace)
		}
	}
	return nil
}
