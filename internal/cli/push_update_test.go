package cli

import (
	"testing"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
)

// TestPushSaysLiveUpdateOrRollout: after a push, each live-updatable
// image of the affected components gets a line saying how its digest
// reached the pods and why; other images and components are not listed.
func TestPushSaysLiveUpdateOrRollout(t *testing.T) {
	live := builder.LiveUpdate("/web")
	env := builder.Env("team", "dev").Components(
		builder.Component("web", builder.Images(builder.Image("web", live), builder.Image("sidecar"))),
		builder.Component("api", builder.Images(builder.Image("api", live))),
		builder.Component("db", builder.Images(builder.Image("db", live)))).Obj()
	env.Status.Components = []v1alpha1.ComponentStatus{
		{Name: "web", Images: []v1alpha1.ImageStatus{
			{Name: "web", LastUpdate: v1alpha1.UpdateLive, UpdateReason: "synced in place: /web"},
			{Name: "sidecar", LastUpdate: v1alpha1.UpdateRollout}}},
		{Name: "api", Images: []v1alpha1.ImageStatus{
			{Name: "api", LastUpdate: v1alpha1.UpdateRollout, UpdateReason: "/etc/api.yaml changed, outside liveUpdate.paths"}}},
		{Name: "db", Images: []v1alpha1.ImageStatus{{Name: "db", LastUpdate: v1alpha1.UpdateLive}}},
	}
	got := howUpdated(env, []string{"web", "api"})
	want := []string{
		"web/web: live update (synced in place: /web)",
		"api/api: rollout: /etc/api.yaml changed, outside liveUpdate.paths",
	}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("line %d: got %q, want %q", i, got[i], want[i])
		}
	}
}
