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

func TestEditPostRenderer(t *testing.T) {
	g := NewWithT(t)
	in := bytes.NewBufferString("---\n# Source: x/a.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\n# empty\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: b\n")
	var seen []string
	out, err := EditPostRenderer{Edit: func(objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
		for _, o := range objs {
			seen = append(seen, o.GetKind()+"/"+o.GetName())
			o.SetAnnotations(map[string]string{"m": "1"})
		}
		return objs, nil
	}}.Run(in)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(seen).To(Equal([]string{"ConfigMap/a", "Secret/b"}))
	objs, err := parseManifests(out.Bytes())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objs).To(HaveLen(2))
	g.Expect(objs[1].GetAnnotations()).To(HaveKeyWithValue("m", "1"))

	// An edit may leave objects out.
	out, err = EditPostRenderer{Edit: func(objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
		return objs[1:], nil
	}}.Run(out)
	g.Expect(err).NotTo(HaveOccurred())
	objs, err = parseManifests(out.Bytes())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objs).To(HaveLen(1))
	g.Expect(objs[0].GetKind()).To(Equal("Secret"))

	_, err = EditPostRenderer{Edit: func([]*unstructured.Unstructured) ([]*unstructured.Unstructured, error) { return nil, errors.New("no") }}.Run(bytes.NewBufferString("a: b\n"))
	g.Expect(err).To(MatchError("post-render: no"))
}

// TestHelmsRefusalOfAnotherReleasesObject: Helm's text for an existing
// object it will not import names whose it is, read back whatever checks
// failed.
func TestHelmsRefusalOfAnotherReleasesObject(t *testing.T) {
	g := NewWithT(t)
	const prefix = `Unable to continue with install: CustomResourceDefinition "jobs.batch.volcano.sh" in namespace "" exists and cannot be imported into the current release: invalid ownership metadata; `
	otherNS := errors.New(prefix + `annotation validation error: key "meta.helm.sh/release-namespace" must equal "team-b": current value is "team-a"`)
	g.Expect(takenObject(otherNS, "volcano", "team-b")).To(Equal(&TakenObjectError{Kind: "CustomResourceDefinition", Name: "jobs.batch.volcano.sh",
		Release: "volcano", ReleaseNamespace: "team-a"}))
	g.Expect(takenObject(otherNS, "volcano", "team-b").Error()).To(Equal(
		"CustomResourceDefinition jobs.batch.volcano.sh belongs to release volcano in namespace team-a: Helm does not take over another release's object"))

	both := errors.New(prefix + `annotation validation error: key "meta.helm.sh/release-name" must equal "vc": current value is "volcano"; annotation validation error: key "meta.helm.sh/release-namespace" must equal "team-b": current value is "team-a"`)
	g.Expect(takenObject(both, "vc", "team-b")).To(HaveField("Release", "volcano"))

	sameNS := errors.New(`Unable to continue with install: ConfigMap "settings" in namespace "team-b" exists and cannot be imported into the current release: invalid ownership metadata; annotation validation error: key "meta.helm.sh/release-name" must equal "vc": current value is "other"`)
	g.Expect(takenObject(sameNS, "vc", "team-b")).To(Equal(&TakenObjectError{Kind: "ConfigMap", Name: "settings", Namespace: "team-b",
		Release: "other", ReleaseNamespace: "team-b"}))

	byHand := errors.New(`Unable to continue with install: ConfigMap "settings" in namespace "team-b" exists and cannot be imported into the current release: invalid ownership metadata; label validation error: missing key "app.kubernetes.io/managed-by": must be set to "Helm"; annotation validation error: missing key "meta.helm.sh/release-name": must be set to "vc"; annotation validation error: missing key "meta.helm.sh/release-namespace": must be set to "team-b"`)
	g.Expect(takenObject(byHand, "vc", "team-b").Error()).To(Equal("ConfigMap team-b/settings exists and belongs to no Helm release: Helm does not take it over"))

	g.Expect(takenObject(errors.New("install: context deadline exceeded"), "vc", "team-b")).To(BeNil())
}
