package helm

import (
	"fmt"
	"sync"

	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
)

// ReleaseInfo is what status shows of one stored release revision.
type ReleaseInfo struct {
	Name      string
	Namespace string
	Revision  int
	// Status is Helm's: deployed, failed, pending-upgrade, ...
	Status       string
	ChartName    string
	ChartVersion string
	// Digest is the digest of chart and values devloop recorded in the
	// release's labels; empty for a release devloop did not write.
	Digest      string
	Description string
}

func infoOf(rls *release.Release) ReleaseInfo {
	if rls == nil {
		return ReleaseInfo{}
	}
	ri := ReleaseInfo{Name: rls.Name, Namespace: rls.Namespace, Revision: rls.Version, Digest: rls.Labels[DigestLabel]}
	if rls.Info != nil {
		ri.Status = string(rls.Info.Status)
		ri.Description = rls.Info.Description
	}
	if rls.Chart != nil && rls.Chart.Metadata != nil {
		ri.ChartName, ri.ChartVersion = rls.Chart.Metadata.Name, rls.Chart.Metadata.Version
	}
	return ri
}

// Observer is a storage driver decorator that records every release
// written through it. Helm writes a release several times during one
// action (pending, then deployed or failed, and the superseded previous
// one); the observer sees each write even when the action later fails,
// so status can report the revision Helm actually left behind.
type Observer struct {
	driver.Driver

	mu       sync.Mutex
	observed []ReleaseInfo
}

// NewObserver wraps d.
func NewObserver(d driver.Driver) *Observer { return &Observer{Driver: d} }

// Create records rls after the wrapped driver stored it.
func (o *Observer) Create(key string, rls *release.Release) error {
	if err := o.Driver.Create(key, rls); err != nil {
		return err
	}
	o.record(rls)
	return nil
}

// Update records rls after the wrapped driver stored it.
func (o *Observer) Update(key string, rls *release.Release) error {
	if err := o.Driver.Update(key, rls); err != nil {
		return err
	}
	o.record(rls)
	return nil
}

func (o *Observer) record(rls *release.Release) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.observed = append(o.observed, infoOf(rls))
}

// Observed returns every write seen so far, oldest first.
func (o *Observer) Observed() []ReleaseInfo {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]ReleaseInfo(nil), o.observed...)
}

// Latest returns the highest revision written so far, and false when
// nothing was written.
func (o *Observer) Latest() (ReleaseInfo, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var latest ReleaseInfo
	for _, ri := range o.observed {
		if ri.Revision >= latest.Revision {
			latest = ri
		}
	}
	return latest, len(o.observed) > 0
}

// DigestLabel is the release label holding the digest of the chart and
// values a revision was made from; an equal digest means nothing to do.
const DigestLabel = "devloop.dev/digest"

// OwnerLabel is the release label holding the UID of the DevEnvironment
// that installed the release: another environment naming the same
// release is refused instead of upgrading or uninstalling it.
const OwnerLabel = "devloop.dev/owner-uid"

// ReleaseOwnedBy reports whether owner (an environment's UID) installed
// rls. A release devloop installed before the owner label existed (a
// digest label but no owner) counts as its own; one installed outside
// devloop (neither) does not.
func ReleaseOwnedBy(rls *release.Release, owner string) bool {
	if o := rls.Labels[OwnerLabel]; o != "" {
		return o == owner
	}
	return rls.Labels[DigestLabel] != ""
}

// NotOwnedError is a release that exists and belongs to someone else.
type NotOwnedError struct {
	Namespace, Name string
	// Owner is the owning environment's UID, or "" for a release
	// installed outside devloop.
	Owner string
}

func (e *NotOwnedError) Error() string {
	who := "was installed outside devloop"
	if e.Owner != "" {
		who = "is owned by another DevEnvironment (uid " + e.Owner + ")"
	}
	return fmt.Sprintf("helm release %s/%s %s: devloop does not take it over; give this component another helm.releaseName or helm.namespace, or uninstall the release", e.Namespace, e.Name, who)
}
