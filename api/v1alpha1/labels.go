package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

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
	// LabelLiveUpdate is on the pods (pod templates) whose containers run
	// under the live update supervisor, value LiveUpdateSupervised: the
	// operator watches those pods, and only those, to sync a pod that
	// starts after a live update as soon as it runs.
	LabelLiveUpdate = "devloop.dev/live-update"
)

// AnnotationOwner is "<namespace>/<name>" of the DevEnvironment that
// created or applied an object (the deploy engine sets it next to
// LabelEnvironment, which holds only the name two environments in two
// namespaces may share); live update syncs only pods under an object
// carrying it.
const AnnotationOwner = "devloop.dev/owner"

// LiveUpdateSupervised is the value of LabelLiveUpdate.
const LiveUpdateSupervised = "supervised"

// Values of LabelRole.
const (
	RoleBuild      = "build"
	RoleWarmBuild  = "warm-build"
	RoleBuildCache = "build-cache"
	RoleTest       = "test"
)

// ContainerWarmBuild is the container of a warm builder pod
// (run.keepWarm) that runs the build command: the build engine names it,
// and `kubectl devloop logs` reads a warm build's output from it.
const ContainerWarmBuild = "build"

// ControllerRef is the owner reference of what the operator creates for
// the environment (builder Jobs, cache claims, test Jobs): garbage
// collected with it, and never blocking its deletion.
func (e *DevEnvironment) ControllerRef() metav1.OwnerReference {
	t, f := true, false
	return metav1.OwnerReference{APIVersion: GroupVersion.String(), Kind: "DevEnvironment",
		Name: e.Name, UID: e.UID, Controller: &t, BlockOwnerDeletion: &f}
}

// LabelValue is s when it is a valid label value, else a readable part of
// it and a hash of all of it: an environment name (up to 253 characters)
// or an image name ("tools/ginkgo") may not be one. Every label the
// operator writes with a name in it, and every selector on one, goes
// through it.
func LabelValue(s string) string {
	if len(validation.IsValidLabelValue(s)) == 0 {
		return s
	}
	readable := strings.NewReplacer("/", "-").Replace(s)
	sum := sha256.Sum256([]byte(s))
	h := hex.EncodeToString(sum[:4])
	if max := validation.LabelValueMaxLength - len(h) - 1; len(readable) > max {
		readable = readable[:max]
	}
	readable = strings.TrimRight(readable, "-._")
	if readable == "" {
		return h
	}
	return readable + "-" + h
}
