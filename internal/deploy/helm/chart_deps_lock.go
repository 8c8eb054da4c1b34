package helm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"helm.sh/helm/v3/pkg/chart"

	"github.com/devloop-dev/devloop/internal/fault"
)

// lockedVersions are the versions a chart's lock file (Chart.lock, or
// requirements.lock for apiVersion v1) gives its dependencies, in the
// order Chart.yaml lists them; nil without a lock file. As `helm
// dependency build` does, a lock whose digest is not that of the
// dependencies Chart.yaml lists is refused: it was written for other
// dependencies. The versions are usually exact; Helm writes a repository
// dependency's range as it is when the repository was not added by name.
func lockedVersions(ch *chart.Chart) ([]string, error) {
	lock := ch.Lock
	if lock == nil {
		return nil, nil
	}
	reqs := ch.Metadata.Dependencies
	if !lockInSync(ch.Metadata.APIVersion, reqs, lock) {
		return nil, fault.Permanentf("chart %s: Chart.lock is out of sync with the dependencies in Chart.yaml (its digest %s is not theirs): run `helm dependency update` and commit Chart.lock, or delete it",
			ch.Name(), lock.Digest)
	}
	versions := make([]string, len(reqs))
	for i, req := range reqs {
		l := lockEntry(lock.Dependencies, i, req)
		if l == nil {
			return nil, fault.Permanentf("chart %s: Chart.lock has no entry for dependency %q", ch.Name(), req.Name)
		}
		versions[i] = l.Version
	}
	return versions, nil
}

// lockInSync checks the lock's digest as Helm computes it: the SHA-256 of
// the JSON of [Chart.yaml's dependencies, the lock's dependencies], or,
// for an apiVersion v1 chart locked by Helm 2, of {"dependencies": ...}.
func lockInSync(apiVersion string, reqs []*chart.Dependency, lock *chart.Lock) bool {
	if sum, err := digestJSON([2][]*chart.Dependency{reqs, lock.Dependencies}); err == nil && sum == lock.Digest {
		return true
	}
	if apiVersion != chart.APIVersionV1 {
		return false
	}
	sum, err := digestJSON(map[string][]*chart.Dependency{"dependencies": reqs})
	return err == nil && sum == lock.Digest
}

func digestJSON(v any) (string, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// lockEntry is the lock's entry for the i-th dependency: Helm writes them
// in Chart.yaml's order, by chart name (not alias) and repository.
func lockEntry(locked []*chart.Dependency, i int, req *chart.Dependency) *chart.Dependency {
	same := func(l *chart.Dependency) bool {
		return l != nil && l.Name == req.Name && l.Repository == req.Repository
	}
	if i < len(locked) && same(locked[i]) {
		return locked[i]
	}
	for _, l := range locked {
		if same(l) {
			return l
		}
	}
	return nil
}
