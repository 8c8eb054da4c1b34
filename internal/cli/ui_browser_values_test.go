package cli

import (
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/test/browser"
)

// A Helm component's card shows its spec and the values the operator
// passed to Helm, read from the release Helm stored (written here by
// Helm's own secret storage); a component not released yet shows its
// spec values and valuesFrom names and says so.
func TestUIComponentShowsSpecAndEffectiveHelmValues(t *testing.T) {
	bctx := browser.Start(t)
	ns := testenv.Namespace(t, k8s, "ui-values")
	spec := teamSpec()
	spec.Components = []v1alpha1.Component{
		{Name: "web", Helm: &v1alpha1.HelmSpec{Chart: v1alpha1.ChartRef{Source: "app", Path: "chart"}, Values: &apiextensionsv1.JSON{Raw: []byte(`{"replicas":1}`)}}},
		{Name: "db", Helm: &v1alpha1.HelmSpec{Chart: v1alpha1.ChartRef{Source: "app", Path: "db"}, Values: &apiextensionsv1.JSON{Raw: []byte(`{"size":"1Gi"}`)},
			ValuesFrom: []v1alpha1.ValuesReference{{Kind: "ConfigMap", Name: "dev-settings", Key: "values.yaml"}}}},
	}
	spec.Tests = nil
	createEnv(t, ns, "team", spec)
	cs, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	// What the operator's Helm stored for revision 2: spec values merged
	// with valuesFrom and imageValues.
	rel := &release.Release{Name: "web", Namespace: ns, Version: 2, Info: &release.Info{Status: release.StatusDeployed},
		Chart:  &chart.Chart{Metadata: &chart.Metadata{Name: "web", Version: "0.1.0"}},
		Config: map[string]any{"replicas": 3, "image": map[string]any{"tag": "dev-4f2a9c0"}}}
	if err := driver.NewSecrets(cs.CoreV1().Secrets(ns)).Create("sh.helm.release.v1.web.v2", rel); err != nil {
		t.Fatal(err)
	}
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		env.Status.Components = []v1alpha1.ComponentStatus{{Name: "web", Phase: v1alpha1.PhaseReady, Release: &v1alpha1.ReleaseStatus{Name: "web", Namespace: ns, Revision: 2, Status: "deployed"}}}
	})
	base, url := launchDashboard(t, testOptions(), "-n", ns)
	browser.Navigate(t, bctx, url)
	browser.WaitJS(t, bctx, "the list", `document.querySelector('tr[data-env]')`)
	browser.Navigate(t, bctx, base+"/#/env/"+ns+"/team/components/web")
	browser.WaitJS(t, bctx, "web's spec", `document.querySelector('[data-component="web"] [data-spec="web"] pre').textContent.includes('"path": "chart"')`)
	browser.WaitJS(t, bctx, "web's values opened", `(() => { const d = document.querySelector('[data-values="web"]'); if (d && !d.open) { d.open = true; } return !!d })()`)
	browser.WaitJS(t, bctx, "the release's values", `(() => { const d = document.querySelector('[data-values="web"]'); return d.querySelector('[data-values-from="release"]') && d.textContent.includes('revision 2') && d.querySelector('pre').textContent.includes('"tag": "dev-4f2a9c0"') && d.querySelector('pre').textContent.includes('"replicas": 3') })()`)
	browser.WaitJS(t, bctx, "db's values opened", `(() => { const d = document.querySelector('[data-values="db"]'); if (d && !d.open) { d.open = true; } return !!d })()`)
	browser.WaitJS(t, bctx, "db's spec values, valuesFrom and why", `(() => { const d = document.querySelector('[data-values="db"]'); return d.querySelector('[data-values-from="spec"]') && d.textContent.includes('not released yet') && d.textContent.includes('ConfigMap/dev-settings') && d.querySelector('pre').textContent.includes('"size": "1Gi"') })()`)
}
