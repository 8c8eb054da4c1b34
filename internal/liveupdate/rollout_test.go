package liveupdate

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/engine"
)

// Some images are rolled out whatever files changed, status saying why,
// before any registry read or pod is looked at (the request has neither a
// registry nor a tenant: touching either would panic).
func TestImagesThatAlwaysRollOut(t *testing.T) {
	live := &v1alpha1.LiveUpdate{Paths: []string{"/server"}}
	cases := []struct {
		name   string
		image  v1alpha1.ImageSpec
		env    func(*v1alpha1.DevEnvironment)
		reason string
	}{
		{"in debug mode", v1alpha1.ImageSpec{Name: "api", LiveUpdate: live, Run: &v1alpha1.BuildRun{Command: []string{"make"}}},
			func(e *v1alpha1.DevEnvironment) {
				e.Annotations = map[string]string{v1alpha1.DebugAnnotation: "api/api"}
			},
			"in debug mode (" + v1alpha1.DebugAnnotation + ")"},
		{"written into chart values as a tag", v1alpha1.ImageSpec{Name: "api", LiveUpdate: live},
			func(e *v1alpha1.DevEnvironment) {
				e.Spec.Components = append(e.Spec.Components, v1alpha1.Component{Name: "chart",
					Helm: &v1alpha1.HelmSpec{ImageValues: []v1alpha1.ImageValue{
						{Image: "api", Path: "server.image", From: "Repository"}, {Image: "api", Path: "server.tag", From: "Tag"}}}})
			},
			"component chart's helm.imageValues writes its tag into the chart's values (server.tag, from: Tag)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := &v1alpha1.DevEnvironment{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "dev"}}
			env.Spec.Components = []v1alpha1.Component{{Name: "api", Images: []v1alpha1.ImageSpec{tc.image}}}
			if tc.env != nil {
				tc.env(env)
			}
			st := &v1alpha1.ComponentStatus{Name: "api", Images: []v1alpha1.ImageStatus{{Name: "api", Digest: "sha256:b", TemplateDigest: "sha256:a"}}}
			recorder := events.NewFakeRecorder(4)
			_, err := (&Engine{Events: recorder}).Reconcile(context.Background(), engine.Request{Env: env, Component: &env.Spec.Components[0], Status: st})
			if err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			ist := st.Images[0]
			if ist.LastUpdate != v1alpha1.UpdateRollout || ist.LiveDigest != "" || ist.DeployDigest() != "sha256:b" || len(recorder.Events) != 0 {
				t.Fatalf("not a rollout of the new digest: %+v, %d LiveUpdated events", ist, len(recorder.Events))
			}
			if !strings.Contains(ist.UpdateReason, tc.reason) {
				t.Fatalf("reason %q, want %q", ist.UpdateReason, tc.reason)
			}
		})
	}
}

// An image whose liveUpdate is taken off loses its live update fields
// once deployed: they described builds it no longer has.
func TestLiveFieldsClearedWithoutLiveUpdate(t *testing.T) {
	c := &v1alpha1.Component{Name: "api", Images: []v1alpha1.ImageSpec{{Name: "api"}}}
	st := &v1alpha1.ComponentStatus{Name: "api", Images: []v1alpha1.ImageStatus{{Name: "api", Digest: "sha256:b",
		TemplateDigest: "sha256:a", LiveDigest: "sha256:b", LastUpdate: v1alpha1.UpdateLive, UpdateReason: "synced in place: /server"}}}
	if st.Images[0].DeployDigest() != "sha256:a" {
		t.Fatalf("before: deploys %s, want the template's", st.Images[0].DeployDigest())
	}
	Deployed(c, st)
	if got := st.Images[0]; got.TemplateDigest != "" || got.LiveDigest != "" || got.LastUpdate != "" || got.UpdateReason != "" || got.DeployDigest() != "sha256:b" {
		t.Fatalf("live fields kept without liveUpdate: %+v", got)
	}
}
