package deploy

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/metrics"
)

// TestAnotherEngineRemembersNothingOfTheFirst: what an engine applied is
// its own memory, not the process's. A second engine in the same process
// (a second operator.New: an envtest suite beside a benchmark, or an
// operator restarted in-process) checks the component the first left in
// sync, as a restarted operator does, instead of trusting a record it
// never made.
func TestAnotherEngineRemembersNothingOfTheFirst(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	writeWebManifests(t, dir)
	ce := newCountedEngine(t, v1alpha1.Component{Name: "app", Manifests: &v1alpha1.ManifestsSpec{Source: "app", Paths: []string{"app"}}}, dirSource{dir})
	ce.reconcile()
	markAvailable(t, ce.env.Namespace, "web")
	ce.reconcile() // found as wanted: remembered in sync
	_, noop := ce.reconcile()
	g.Expect(noop.Writes()+noop[metrics.VerbDryRun]).To(BeZero(), "the first engine trusts its own record: %v", noop)

	ce.e = &Engine{Mapper: ce.e.Mapper, Charts: &ChartLoader{CacheDir: t.TempDir()}}
	res, fresh := ce.reconcile()
	g.Expect(res.Phase).To(Equal(v1alpha1.PhaseReady), res.Message)
	g.Expect(fresh.Writes()+fresh[metrics.VerbDryRun]).To(BeNumerically(">", 0),
		"a new engine applies or dry-runs what it has no record of: %v", fresh)
}
