package cli

import (
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/test/browser"
)

// The sample a newcomer applies (config/samples/dev/hello.yaml, as make
// dev-up does) declares a port, so its web component's card offers the
// Port-forward button before anything else is set up.
func TestUISampleOffersAPortForward(t *testing.T) {
	bctx := browser.Start(t)
	path := filepath.Join(testenv.RepoRoot(), "config", "samples", "dev", "hello.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sample := &v1alpha1.DevEnvironment{}
	if err := yaml.UnmarshalStrict(data, sample); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	ns := testenv.Namespace(t, k8s, "ui-sample")
	createEnv(t, ns, sample.Name, sample.Spec)
	base, url := launchDashboard(t, testOptions(), "-n", ns)
	browser.Navigate(t, bctx, url)
	browser.WaitJS(t, bctx, "the list", `document.querySelector('tr[data-env]')`)
	browser.Navigate(t, bctx, base+"/#/env/"+ns+"/"+sample.Name+"/components")
	browser.WaitJS(t, bctx, "web's Port-forward button for the sample's declared port", `(() => {
	  const p = document.querySelector('[data-component="web"] [data-port="web/http"]');
	  return p && p.textContent.includes('svc/hello-web:8080') && p.querySelector('button[data-forward="start"]');
	})()`)
}
