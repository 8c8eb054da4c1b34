// Package timeline is the change timeline: for each change (a new source
// revision) on its way from the developer's push to serving, the time each
// step took. The operator writes it, bounded, into one ConfigMap per
// environment (not the DevEnvironment's status: it is history, it changes
// at every step, and the object's size budget has no room for it); the
// dashboard and the CLI read it as the user.
package timeline

import "time"

// MaxChanges is how many changes a timeline keeps, newest first.
const MaxChanges = 10

// MaxSteps is how many steps one change keeps.
const MaxSteps = 32

// Change is one change on its way from push to serving.
type Change struct {
	// Source is the spec.sources[].name the change arrived in.
	Source string `json:"source"`
	// Revision is the source's revision that carried it.
	Revision string `json:"revision"`
	// Started is when it began: the push as the client recorded it, or
	// when the operator first saw the revision.
	Started time.Time `json:"started"`
	// Serving is when every component the change touched was Ready on it;
	// zero while in flight or after it failed.
	Serving *time.Time `json:"serving,omitempty"`
	// Result is where it stands.
	Result Result `json:"result"`
	// Message says why a change Failed (bounded, MaxMessage).
	Message string `json:"message,omitempty"`
	// Steps in the order they started.
	Steps []Step `json:"steps,omitempty"`
}

// Result is where a change stands.
type Result string

const (
	InFlight   Result = "InFlight"
	Serving    Result = "Serving"
	Failed     Result = "Failed"
	Superseded Result = "Superseded"
)

// StepName names a step of a change.
type StepName string

const (
	// Pack and Upload are measured by the client that pushed
	// (`kubectl devloop push`) and reported with the source.
	Pack   StepName = "Pack"
	Upload StepName = "Upload"
	// Fetch is the operator fetching the source.
	Fetch StepName = "Fetch"
	// Compile is an image's run step (the builder's compile).
	Compile StepName = "Compile"
	// Assemble is an image's layers assembled; Push its push.
	Assemble StepName = "Assemble"
	Push     StepName = "Push"
	// Deploy is a component's Helm upgrade or manifests apply.
	Deploy StepName = "Deploy"
	// Rollout and LiveUpdate are how the new image reached the pods:
	// Rollout the wait after Deploy for the workloads to run it
	// (rollout.go), LiveUpdate its files synced into the running pods.
	Rollout    StepName = "Rollout"
	LiveUpdate StepName = "LiveUpdate"
	// Ready is the wait for the component's objects to be ready; after a
	// Rollout, the rest of the reconcile that found them so.
	Ready StepName = "Ready"
)

// Step is one step of a change.
type Step struct {
	Name StepName `json:"name"`
	// Component is the component, or component/image, the step belongs
	// to; empty for the environment's own steps (Pack, Upload, Fetch).
	Component string `json:"component,omitempty"`
	// Start is when the step began.
	Start time.Time `json:"start"`
	// Duration is how long it took; zero while it runs.
	Duration time.Duration `json:"duration,omitempty"`
}
