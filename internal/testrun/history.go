package testrun

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strings"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// Log tail bounds by age, so 32 suites with 10 runs each stay far below
// the object size limit: the newest finished run of a suite keeps the
// full 4 KiB, the one before it 1 KiB, older ones their last 256 bytes
// (usually the summary line: "FAIL", "ok", "Ran 12 of 40 Specs").
const (
	MaxLogTail    = 4096
	secondLogTail = 1024
	oldLogTail    = 256
)

// Trim keeps the newest limit runs (runs are newest first) and returns
// the ones it dropped, whose Jobs are to be deleted. Unfinished runs are
// never dropped, so a suite can keep more than limit runs while one runs
// and one is queued.
func Trim(runs []v1alpha1.TestRun, limit int) (kept, dropped []v1alpha1.TestRun) {
	for i, r := range runs {
		if i < limit || !r.Result.Finished() {
			kept = append(kept, r)
			continue
		}
		dropped = append(dropped, r)
	}
	return kept, dropped
}

// ShrinkTails cuts older runs' log tails to their age's bound.
func ShrinkTails(runs []v1alpha1.TestRun) {
	finished := 0
	for i := range runs {
		if !runs[i].Result.Finished() {
			continue
		}
		bound := oldLogTail
		switch finished {
		case 0:
			bound = MaxLogTail
		case 1:
			bound = secondLogTail
		}
		runs[i].LogTail = Tail(runs[i].LogTail, bound)
		finished++
	}
}

// Tail is the end of log in at most n bytes, starting at a line when one
// starts within the last n bytes, and never splitting a UTF-8 character.
func Tail(log string, n int) string {
	if len(log) <= n {
		return log
	}
	cut := log[len(log)-n:]
	if i := strings.IndexByte(cut, '\n'); i >= 0 && i < len(cut)-1 {
		return cut[i+1:]
	}
	for len(cut) > 0 && cut[0]&0xC0 == 0x80 {
		cut = cut[1:]
	}
	return cut
}

// DigestSet is a short hash of a set of images (name to digest), the same
// for the same set in any order: an OnChange suite runs once per set.
func DigestSet(images map[string]string) string {
	names := make([]string, 0, len(images))
	for n := range images {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		h.Write([]byte(n + "=" + images[n] + "\n"))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))[:32]
}
