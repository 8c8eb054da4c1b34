package helm

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
)

// WriterLabel names, on every revision devloop stores, the process that
// wrote it and the revision it wrote: "<lease>-<process>.<revision>". A
// revision left pending by an operator that died (or lost its lease)
// mid-action is otherwise indistinguishable from someone's helm upgrade
// still running, and waits out the action timeout before it is unlocked.
// With the label, the process that now holds the same lease knows the
// writer is gone: leader election lets one process of a lease act at a
// time, and controller-runtime stops a process that loses its lease.
// The revision is part of the value because helm upgrade copies the
// previous revision's labels into the next one: a copied label names
// another revision, so it never vouches for someone else's write.
const WriterLabel = "devloop.dev/writer"

// NewWriter is the writer name of this process as the elected leader of
// lease; "" when the process runs without leader election (nothing then
// proves another writer gone).
func NewWriter(lease string) string {
	if lease == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(lease))
	var id [6]byte
	_, _ = rand.Read(id[:])
	return hex.EncodeToString(sum[:4]) + "-" + hex.EncodeToString(id[:])
}

// writerDriver stamps every revision written through it with WriterLabel.
type writerDriver struct {
	driver.Driver
	writer string
}

func (d writerDriver) Create(key string, rls *release.Release) error {
	d.stamp(rls)
	return d.Driver.Create(key, rls)
}

func (d writerDriver) Update(key string, rls *release.Release) error {
	d.stamp(rls)
	return d.Driver.Update(key, rls)
}

func (d writerDriver) stamp(rls *release.Release) {
	if rls.Labels == nil {
		rls.Labels = map[string]string{}
	}
	rls.Labels[WriterLabel] = d.writer + "." + strconv.Itoa(rls.Version)
}

// leftByAnotherLeader reports whether the pending revision last was
// written by another process elected on the same lease as writer: that
// process has lost the lease, so its action has ended.
func leftByAnotherLeader(last *release.Release, writer string) bool {
	if writer == "" {
		return false
	}
	who, rev, ok := cutLast(last.Labels[WriterLabel], ".")
	if !ok || rev != strconv.Itoa(last.Version) || who == writer {
		return false
	}
	lease, _, _ := strings.Cut(who, "-")
	ours, _, _ := strings.Cut(writer, "-")
	return lease == ours
}

func cutLast(s, sep string) (before, after string, found bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}
