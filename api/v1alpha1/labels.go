package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Labels on the objects the operator creates or applies for an
// environment.
const (
	LabelEnvironment = "devloop.dev/environment"
	LabelComponent   = "devloop.dev/component"
	LabelImage       = "devloop.dev/image"
	LabelPlatform    = "devloop.dev/platform"
	LabelRole        = "devloop.dev/role"
	LabelSuite       = "devloop.dev/suite"
	LabelRun         = "devloop.dev/run"
)

// Values of LabelRole.
const (
	RoleBuild      = "build"
	RoleWarmBuild  = "warm-build"
	RoleBuildCache = "build-cache"
	RoleTest       = "test"
)

// ControllerRef is the owner reference of what the operator creates for
// the environment (builder Jobs, cache claims, test Jobs): garbage
// collected with it, and never blocking its deletion.
func (e *DevEnvironment) ControllerRef() metav1.OwnerReference {
	t, f := true, false
	return metav1.OwnerReference{APIVersion: GroupVersion.String(), Kind: "DevEnvironment",
		Name: e.Name, UID: e.UID, Controller: &t, BlockOwnerDeletion: &f}
}
