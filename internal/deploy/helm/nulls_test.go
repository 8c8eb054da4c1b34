package helm

import (
	"testing"

	. "github.com/onsi/gomega"
)

// TestParseManifestsReadsNullAsNoKey: a rendered `key: null` is no key,
// at any depth and in maps inside lists; a null list element stays, and a
// map left empty stays empty (it was written).
func TestParseManifestsReadsNullAsNoKey(t *testing.T) {
	g := NewWithT(t)
	objs, err := parseManifests([]byte(`apiVersion: nulls.devloop.dev/v1
kind: NodePolicy
metadata:
  name: p
  labels: null
spec:
  validator: {plugin: null, version: v1}
  migManager: {config: {name: null}}
  env:
  - {name: A, value: null}
  - null
  toleration: ~
---
# a document that held only nulls is empty
kind: null
`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objs).To(HaveLen(1))
	g.Expect(objs[0].Object).To(Equal(map[string]any{
		"apiVersion": "nulls.devloop.dev/v1",
		"kind":       "NodePolicy",
		"metadata":   map[string]any{"name": "p"},
		"spec": map[string]any{
			"validator":  map[string]any{"version": "v1"},
			"migManager": map[string]any{"config": map[string]any{}},
			"env":        []any{map[string]any{"name": "A"}, nil},
		},
	}))
}
