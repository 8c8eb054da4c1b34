package cli

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/test/browser"
)

// pushed writes a source's status as the operator does after a push to
// an OCI source: the new revision and digest, stamped lastResolveTime
// (lastFetchTime is not written for content whose digest the reference
// already named).
func pushed(t *testing.T, ns, name, digest string) {
	t.Helper()
	playOperator(t, ns, name, func(env *v1alpha1.DevEnvironment) {
		now := metav1.Now()
		env.Status.Sources = []v1alpha1.SourceStatus{{Name: "app", Revision: "dev@" + digest, Digest: digest, LastResolveTime: &now}}
	})
}

// "Last push" on the list shows the push just made, from what the
// operator records, and the next one when it comes.
func TestUIListShowsTheLastPush(t *testing.T) {
	bctx := browser.Start(t)
	ns := testenv.Namespace(t, k8s, "ui-push")
	createEnv(t, ns, "team", teamSpec())
	key := ns + "/team"
	pushed(t, ns, "team", "sha256:4f2a9c0d1e2b3a4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4")
	_, url := launchDashboard(t, testOptions(), "-n", ns)
	browser.Navigate(t, bctx, url)
	cell := `document.querySelector('tr[data-env="` + key + `"] [data-col="push"]')`
	browser.WaitJS(t, bctx, "the push on the list", cell+` && `+cell+`.textContent.startsWith('app 4f2a9c0d1e2b') && `+cell+`.textContent.includes('ago')`)
	pushed(t, ns, "team", "sha256:77aa0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d")
	browser.WaitJS(t, bctx, "the next push on the list", cell+`.textContent.startsWith('app 77aa0c1d2e3f')`)
}

// "Idle" and "ago" count on a quiet page: with no status change at all,
// the time since the last push grows on the list.
func TestUIAgoTicksOnAQuietPage(t *testing.T) {
	bctx := browser.Start(t)
	ns := testenv.Namespace(t, k8s, "ui-tick")
	createEnv(t, ns, "team", teamSpec())
	pushed(t, ns, "team", "sha256:4f2a9c0d1e2b3a4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4")
	_, url := launchDashboard(t, testOptions(), "-n", ns)
	browser.Navigate(t, bctx, url)
	ago := `(document.querySelector('tr[data-env="` + ns + `/team"] [data-col="push"] [data-ago]') || {}).textContent`
	browser.WaitJS(t, bctx, "the push's age", ago)
	first := browser.EvalString(t, bctx, ago)
	browser.WaitJS(t, bctx, "the push's age to change from "+first, ago+` !== '`+first+`'`)
}
