package v1alpha1

// LiveUpdate lets a change to some of an image's files reach the running
// pods without a rollout: the build adds a small supervisor to the image
// (at /.devloop/supervisor) that starts the image's program; when a new
// build differs from the image the pods run only in these paths, the
// operator copies the changed files into every running pod of the
// component (pods/exec, as the environment's ServiceAccount) and the
// supervisor does what After says. Anything else — a file outside the
// paths, the image config (env, entrypoint, user), the chart or manifests
// — is rolled out as without liveUpdate. The image pushed under its tags
// stays the truth: a rollout at any time runs the same files. Every image
// of an environment may have it; their paths and command arguments
// together are at most 48 (the CRD's size budget).
//
// +kubebuilder:validation:XValidation:rule="!has(self.command) || (has(self.after) && self.after == 'Command')",message="liveUpdate.command is only run with liveUpdate.after: Command",fieldPath=".command"
// +kubebuilder:validation:XValidation:rule="!has(self.after) || self.after != 'Command' || has(self.command)",message="liveUpdate.after: Command needs liveUpdate.command",fieldPath=".command"
type LiveUpdate struct {
	// Paths of the image that may be updated in place: absolute files or
	// directories (a directory takes everything under it), e.g. /manager
	// or /srv/static.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:items:XValidation:rule=`self.matches(r'^/[^/]') && !self.matches(r'(^|/)[.][.]?(/|$)') && !self.matches(r'^/[.]devloop(/|$)')`,message="liveUpdate.paths must be absolute paths in the image below /, without '.' or '..' segments, outside /.devloop"
	Paths []string `json:"paths"`

	// After is what the supervisor does once files are synced: Restart
	// the program (SIGTERM, then SIGKILL after 5 s, and start it again),
	// run Command, or None (for files the program reads again by itself).
	// +optional
	// +kubebuilder:default=Restart
	// +kubebuilder:validation:Enum=Restart;None;Command
	After LiveUpdateAfter `json:"after,omitempty"`

	// Command run in the container after a sync when after is Command,
	// e.g. [/app/reload]. No shell is involved.
	// +optional
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:MaxLength=64
	Command []string `json:"command,omitempty"`
}

// LiveUpdateAfter is what follows a live update's file sync.
type LiveUpdateAfter string

// What follows a sync.
const (
	LiveUpdateRestart LiveUpdateAfter = "Restart"
	LiveUpdateNone    LiveUpdateAfter = "None"
	LiveUpdateCommand LiveUpdateAfter = "Command"
)

// ImageUpdate is how an image's newest digest reached the component's
// pods.
// +kubebuilder:validation:Enum=LiveUpdate;Rollout
type ImageUpdate string

// How a digest reached the pods.
const (
	// UpdateLive: its files were synced into the running pods, whose
	// templates still run the previous digest.
	UpdateLive ImageUpdate = "LiveUpdate"
	// UpdateRollout: the workloads' pod templates were changed to run it.
	UpdateRollout ImageUpdate = "Rollout"
)

// ReasonLiveUpdated is the event of pods synced in place.
const ReasonLiveUpdated = "LiveUpdated"

// LiveDigestAnnotation is set by the operator on a pod once the files of
// that digest were synced into it: a pod without it, or with another
// digest, is synced when it runs (a pod created after live updates).
const LiveDigestAnnotation = "devloop.dev/live-digest"

// DeployDigest is the digest the workloads' pod templates are to run:
// while a live update serves Digest in place, the one they run already
// (TemplateDigest), so deploying changes no template; else Digest.
func (s *ImageStatus) DeployDigest() string {
	if s.LiveDigest != "" && s.LiveDigest == s.Digest && s.TemplateDigest != "" {
		return s.TemplateDigest
	}
	return s.Digest
}

// ServesLive reports whether Digest serves in place in pods whose
// templates run an older digest.
func (s *ImageStatus) ServesLive() bool {
	return s.LiveDigest != "" && s.LiveDigest == s.Digest && s.TemplateDigest != "" && s.TemplateDigest != s.Digest
}

// PodDigest is the digest a running pod of the template (TemplateDigest)
// is to be synced to, as its LiveDigestAnnotation will say: LiveDigest
// while a live update serves in place, Digest once the template runs it
// (an empty sync: "you are current"), "" while a rollout is due or
// before any template ran a live-updatable build.
func (s *ImageStatus) PodDigest() string {
	switch {
	case s.TemplateDigest == "":
		return ""
	case s.TemplateDigest == s.Digest:
		return s.Digest
	}
	return s.LiveDigest
}
