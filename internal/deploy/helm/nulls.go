package helm

// DropNulls removes, in place, every map entry of obj whose value is
// null, in nested maps and in maps inside lists: a rendered manifest is
// read as Helm and kubectl read it, where `key: null` means "no such
// key" (a chart's `{{ .Values.x | toYaml }}` of an unset value renders
// it). Sent as is, a null is refused by server-side apply for a field
// the schema does not make nullable (a custom resource's
// `spec.validator.plugin: "null"`), and unstructured accessors fail on
// it, though Helm's create was accepted. A null list element is kept:
// it is an element, not a missing key, and the API server judges it as
// it does kubectl's.
func DropNulls(obj map[string]any) {
	for k, v := range obj {
		if v == nil {
			delete(obj, k)
			continue
		}
		dropNullsIn(v)
	}
}

func dropNullsIn(v any) {
	switch v := v.(type) {
	case map[string]any:
		DropNulls(v)
	case []any:
		for _, e := range v {
			dropNullsIn(e)
		}
	}
}
