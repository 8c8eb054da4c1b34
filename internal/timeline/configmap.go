package timeline

// The timeline's ConfigMap: one per environment, in its namespace, owned
// by it (garbage-collected with it) and labelled so that a reader lists
// and watches every environment's timeline with one selector.
const (
	// NamePrefix + the environment's name is the ConfigMap's name.
	NamePrefix = "devloop-changes-"
	// Role is the value of v1alpha1.LabelRole on the ConfigMap.
	Role = "change-timeline"
	// DataKey holds the changes as JSON, newest first.
	DataKey = "changes.json"
)
