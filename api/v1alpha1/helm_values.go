package v1alpha1

// MaxHelmValues bounds components[].helm.values, the one field of the spec
// the schema cannot bound (free-form YAML): all components' values
// together, serialized as JSON, at most this many bytes. The operator
// checks it with the spec (internal/plan) and stalls the environment naming
// the field; larger values belong in a ConfigMap named in valuesFrom. The
// object size test counts it once, beside the worst-case spec.
const MaxHelmValues = 32 << 10
