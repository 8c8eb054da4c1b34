package v1alpha1

import "slices"

// Totals per environment of the status lists that grow with the cluster,
// as the CEL rules on DevEnvironmentStatus state them (test/crd checks
// the worst case they admit). A bound per list alone would multiply by the
// 32 components or suites: 256 inventory entries each made 8,192 objects,
// 10 runs each 320 runs, and the status 16.6 MB, ten times what etcd
// stores. With these totals spec, status and metadata keep 300 kB under
// etcd's limit (docs/features.md "Size budget").
//
// Who keeps to them: the deploy engine stalls a manifests component whose
// inventory would not fit (an inventory is never cut: pruning depends on
// it); the test engine drops the oldest finished runs and shortens older
// log tails and result names, and queues no run the history cannot hold;
// Bound cuts the lists that only report (workloads, waitingFor, drift).
const (
	// MaxStatusImages is the spec's total of images: one status each.
	MaxStatusImages = 16
	// MaxInventory and MaxInventoryText bound the objects the manifests
	// components applied: how many, and the characters of their names
	// (ObjectRef.TextSize). 256 objects of 96 characters fit (a CRD's
	// reference is about 80).
	MaxInventory     = 256
	MaxInventoryText = 24576
	// MaxWorkloads and MaxWorkloadsText bound the Helm releases'
	// workloads, kept for `kubectl devloop logs`; Bound cuts the rest and
	// counts it in MoreWorkloads.
	MaxWorkloads     = 64
	MaxWorkloadsText = 8192
	// MaxComponentMessages is the characters of all components' messages
	// together: 16 at their full MaxComponentMessage, or 32 at 512. Bound
	// cuts the longest to share it (test/crd: 16 kB of the headroom).
	MaxComponentMessages = 16384
	// MaxWaitingFor and MaxDrift bound the components' waitingFor entries
	// and drift lines together; the message still says what a component
	// waits for.
	MaxWaitingFor = 64
	MaxDrift      = 16
	// MaxRuns bounds the test runs of all suites together: one queued or
	// running run per suite fits.
	MaxRuns = 32
	// MaxRunLogTails is the characters of all runs' log tails together:
	// four newest tails in full, or one each for 32 suites at 512.
	MaxRunLogTails = 16384
	// MaxResultNames bounds the failed and flaky test names of all runs.
	MaxResultNames = 32
	// MaxRunImages bounds the images-under-test entries of all runs: 6
	// runs testing all 16 images, or 32 runs testing 3.
	MaxRunImages = 96
	// MaxRunParams bounds the params of all runs (the trigger's env vars).
	MaxRunParams = 32
)

// TextSize is the characters of the reference's names, as the CEL totals
// on inventory and workloads count them.
func (r ObjectRef) TextSize() int {
	return len(r.Group) + len(r.Version) + len(r.Kind) + len(r.Namespace) + len(r.Name)
}

// InventorySize is the objects and the characters of their names that
// the components' inventories hold, the one named skip left out: what the
// other components leave of MaxInventory and MaxInventoryText.
func (s *DevEnvironmentStatus) InventorySize(skip string) (objects, text int) {
	for _, c := range s.Components {
		if c.Name == skip {
			continue
		}
		objects += len(c.Inventory)
		for _, r := range c.Inventory {
			text += r.TextSize()
		}
	}
	return objects, text
}

// boundTotals cuts the report-only lists to their environment totals, in
// the order of the components: workloads (counting the rest in
// MoreWorkloads), waitingFor and drift.
func (s *DevEnvironmentStatus) boundTotals() {
	workloads, text, waiting, drift := 0, 0, 0, 0
	for i := range s.Components {
		c := &s.Components[i]
		if rel := c.Release; rel != nil {
			n := 0
			for n < len(rel.Workloads) && workloads < MaxWorkloads && text+rel.Workloads[n].TextSize() <= MaxWorkloadsText {
				text += rel.Workloads[n].TextSize()
				workloads++
				n++
			}
			if n < len(rel.Workloads) {
				rel.MoreWorkloads += int32(len(rel.Workloads) - n)
				rel.Workloads = rel.Workloads[:n:n]
				if n == 0 {
					rel.Workloads = nil
				}
			}
		}
		c.WaitingFor = cutList(c.WaitingFor, MaxWaitingFor-waiting)
		waiting += len(c.WaitingFor)
		c.Drift = cutList(c.Drift, MaxDrift-drift)
		drift += len(c.Drift)
	}
}

// cutList keeps the first n items of l; a list within n is left as it is
// (nil stays nil), so a status that fits compares equal after Bound.
func cutList(l []string, n int) []string {
	if len(l) <= n {
		return l
	}
	if n == 0 {
		return nil
	}
	return l[:n]
}

// boundMessages cuts the components' messages to MaxComponentMessages
// together. The messages within an equal share of what is left stay
// whole; the longer ones are cut to that share, keeping their start (what
// a message says first is what it is about), so no component loses its
// message to the ones before it.
func (s *DevEnvironmentStatus) boundMessages() {
	lengths := make([]int, 0, len(s.Components))
	total := 0
	for _, c := range s.Components {
		lengths = append(lengths, len(c.Message))
		total += len(c.Message)
	}
	if total <= MaxComponentMessages {
		return
	}
	slices.Sort(lengths)
	share, left := 0, MaxComponentMessages
	for i, n := range lengths {
		share = left / (len(lengths) - i)
		if n > share {
			break
		}
		left -= n
	}
	// cutEnd marks the cut with "...": a share under that only happens
	// past the schema's 32 components.
	share = max(share, 3)
	for i := range s.Components {
		s.Components[i].Message = cutEnd(s.Components[i].Message, share)
	}
}
