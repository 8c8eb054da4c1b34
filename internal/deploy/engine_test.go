package deploy

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/deploy/helm"
)

// TestRecentlyDeployedReleaseIsNotCheckedForDrift: within the quiet period
// after a Helm action the release is rolling out.
func TestRecentlyDeployedReleaseIsNotCheckedForDrift(t *testing.T) {
	at := func(ago time.Duration) *helm.Revision {
		return &helm.Revision{LastDeployed: time.Now().Add(-ago)}
	}
	if !recentlyDeployed(at(2*time.Second), 10*time.Second) {
		t.Error("deployed 2s ago, quiet 10s: want recently deployed")
	}
	if recentlyDeployed(at(time.Minute), 10*time.Second) {
		t.Error("deployed a minute ago: want checked")
	}
	if recentlyDeployed(at(0), 0) || recentlyDeployed(nil, time.Minute) {
		t.Error("no quiet period, or no release: want checked")
	}
}

// TestHelmTimeoutCapped: a spec's Helm timeout above the operator's
// maximum is cut to it, and the progress note says so; shorter ones and
// the default are kept.
func TestHelmTimeoutCapped(t *testing.T) {
	spec := func(d time.Duration) *v1alpha1.HelmSpec {
		return &v1alpha1.HelmSpec{Timeout: &metav1.Duration{Duration: d}}
	}
	e := &Engine{MaxHelmTimeout: 10 * time.Minute}
	for _, c := range []struct {
		spec *v1alpha1.HelmSpec
		want time.Duration
	}{
		{spec(6 * time.Hour), 10 * time.Minute},
		{spec(2 * time.Minute), 2 * time.Minute},
		{&v1alpha1.HelmSpec{}, defaultHelmTimeout},
	} {
		if got := e.helmTimeout(c.spec); got != c.want {
			t.Errorf("timeout %v: got %s, want %s", c.spec.Timeout, got, c.want)
		}
	}
	if got := (&Engine{}).helmTimeout(spec(24 * time.Hour)); got != DefaultMaxHelmTimeout {
		t.Errorf("default cap: got %s, want %s", got, DefaultMaxHelmTimeout)
	}
	c := &v1alpha1.Component{Helm: spec(6 * time.Hour)}
	note := e.timeoutNote(c, helm.ReleaseRequest{Timeout: e.helmTimeout(c.Helm)})
	if want := "(timeout 10m0s, the operator's maximum, not the 6h0m0s the spec asks)"; !strings.Contains(note, want) {
		t.Errorf("note %q does not say %q", note, want)
	}
}
