package helm

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/devloop-dev/devloop/internal/fault"
)

func TestClassifyHelm(t *testing.T) {
	cases := []struct {
		name    string
		err     error
		failure Failure
		check   func(g Gomega, err error)
	}{
		{"forbidden through a broken chain", fmt.Errorf("failed pre-install: %s", errors.New(
			`deployments.apps "x" is forbidden: User "system:serviceaccount:team:deployer" cannot create resource "deployments" in API group "apps" in the namespace "prod"`)),
			FailureForbidden, func(g Gomega, err error) {
				g.Expect(fault.IsPermanent(err)).To(BeTrue())
				g.Expect(err.Error()).To(Equal("install: forbidden: serviceaccount team/deployer cannot create deployments.apps in namespace prod"))
			}},
		{"cluster scope", errors.New(`User "alice" cannot create resource "customresourcedefinitions" in API group "apiextensions.k8s.io" at the cluster scope`),
			FailureForbidden, func(g Gomega, err error) {
				g.Expect(err.Error()).To(HaveSuffix("user alice cannot create customresourcedefinitions.apiextensions.k8s.io at cluster scope"))
			}},
		{"connection refused", errors.New("Get https://10.0.0.1/api: dial tcp: connect: connection refused"),
			FailureUnavailable, func(g Gomega, err error) { g.Expect(fault.IsUnavailable(err)).To(BeTrue()) }},
		{"hook", errors.New("failed pre-install: warning: Hook pre-install x/templates/hook.yaml failed"),
			FailureHook, func(g Gomega, err error) { g.Expect(fault.IsPermanent(err)).To(BeFalse()) }},
		{"other", errors.New("boom"), FailureAction, func(g Gomega, err error) { g.Expect(err).To(MatchError("install: boom")) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f, err := classifyHelm(ActionInstall, tc.err)
			g.Expect(f).To(Equal(tc.failure))
			tc.check(g, err)
		})
	}
}

func TestMutatorPostRenderer(t *testing.T) {
	g := NewWithT(t)
	in := bytes.NewBufferString("---\n# Source: x/a.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\n# empty\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: b\n")
	var seen []string
	out, err := MutatorPostRenderer{Mutate: func(objs []*unstructured.Unstructured) error {
		for _, o := range objs {
			seen = append(seen, o.GetKind()+"/"+o.GetName())
			o.SetAnnotations(map[string]string{"m": "1"})
		}
		return nil
	}}.Run(in)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(seen).To(Equal([]string{"ConfigMap/a", "Secret/b"}))
	objs, err := parseManifests(out.Bytes())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objs).To(HaveLen(2))
	g.Expect(objs[1].GetAnnotations()).To(HaveKeyWithValue("m", "1"))

	_, err = MutatorPostRenderer{Mutate: func([]*unstructured.Unstructured) error { return errors.New("no") }}.Run(bytes.NewBufferString("a: b\n"))
	g.Expect(err).To(MatchError("post-render: no"))
}
