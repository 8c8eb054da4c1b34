package v1alpha1

import "testing"

// The digest a pod of the template is to be synced to, and what the
// deploy step puts in the template, through a live update's life.
func TestPodAndDeployDigests(t *testing.T) {
	cases := []struct {
		name       string
		st         ImageStatus
		pod, templ string
	}{
		{"no live-updatable template yet", ImageStatus{Digest: "b"}, "", "b"},
		{"the template runs the newest", ImageStatus{Digest: "b", TemplateDigest: "b"}, "b", "b"},
		{"serving b in place", ImageStatus{Digest: "b", TemplateDigest: "a", LiveDigest: "b"}, "b", "a"},
		{"a rollout of c is due", ImageStatus{Digest: "c", TemplateDigest: "a"}, "", "c"},
		{"c built, b still served in place", ImageStatus{Digest: "c", TemplateDigest: "a", LiveDigest: "b"}, "b", "c"},
	}
	for _, tc := range cases {
		if got := tc.st.PodDigest(); got != tc.pod {
			t.Errorf("%s: PodDigest %q, want %q", tc.name, got, tc.pod)
		}
		if got := tc.st.DeployDigest(); got != tc.templ {
			t.Errorf("%s: DeployDigest %q, want %q", tc.name, got, tc.templ)
		}
	}
}
