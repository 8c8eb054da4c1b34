package deploy

import (
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"
)

// TestRecentlyDeployedReleaseIsNotCheckedForDrift: within the quiet period
// after a Helm action the release is rolling out.
func TestRecentlyDeployedReleaseIsNotCheckedForDrift(t *testing.T) {
	at := func(ago time.Duration) *release.Release {
		return &release.Release{Info: &release.Info{LastDeployed: helmtime.Time{Time: time.Now().Add(-ago)}}}
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
