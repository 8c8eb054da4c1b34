package v1alpha1

import "unicode/utf8"

// The bounds of the status's free text, as the CRD schema states them
// (the markers in status_types.go; test/crd checks they agree). Every
// status writer calls Bound before it writes, so a long error or log line
// written anywhere is cut here rather than refused by the API server.
const (
	MaxComponentMessage   = 1024
	MaxDriftLine          = 256
	MaxDriftLines         = 16
	MaxUpdateReason       = 256
	MaxBuildLogTail       = 1024
	MaxSourceRevision     = 512
	MaxTestMessage        = 512
	MaxRunTrigger         = 300
	MaxRunMessage         = 512
	MaxRunLogTail         = 4096
	MaxLastHandledTrigger = 1024
	MaxLastTestResult     = 128
	MaxSummary            = 256
	MaxConditionMessage   = 1024
)

// Bound cuts the status's free text to the schema's bounds: messages and
// reasons keep their start, log tails their end; and the lists that only
// report (workloads, waitingFor, drift) to their totals per environment.
// Names, digests and other identifiers are bounded where they are made
// and are left alone; so are inventories and test runs, whose engines keep
// to their totals (status_totals.go).
func (s *DevEnvironmentStatus) Bound() {
	s.LastHandledTrigger = cutEnd(s.LastHandledTrigger, MaxLastHandledTrigger)
	s.LastTestResult = cutEnd(s.LastTestResult, MaxLastTestResult)
	s.Summary = cutEnd(s.Summary, MaxSummary)
	for i := range s.Conditions {
		s.Conditions[i].Message = cutEnd(s.Conditions[i].Message, MaxConditionMessage)
	}
	s.boundTotals()
	for i := range s.Sources {
		s.Sources[i].Revision = cutEnd(s.Sources[i].Revision, MaxSourceRevision)
	}
	for i := range s.Components {
		c := &s.Components[i]
		c.Message = cutEnd(c.Message, MaxComponentMessage)
		if len(c.Drift) > MaxDriftLines {
			c.Drift = c.Drift[:MaxDriftLines]
		}
		for j := range c.Drift {
			c.Drift[j] = cutEnd(c.Drift[j], MaxDriftLine)
		}
		for j := range c.Images {
			img := &c.Images[j]
			img.UpdateReason = cutEnd(img.UpdateReason, MaxUpdateReason)
			if img.Build != nil {
				img.Build.LogTail = cutStart(img.Build.LogTail, MaxBuildLogTail)
			}
		}
	}
	s.boundMessages()
	for i := range s.Tests {
		t := &s.Tests[i]
		t.Message = cutEnd(t.Message, MaxTestMessage)
		for j := range t.Runs {
			r := &t.Runs[j]
			r.Trigger = cutEnd(r.Trigger, MaxRunTrigger)
			r.Message = cutEnd(r.Message, MaxRunMessage)
			r.LogTail = cutStart(r.LogTail, MaxRunLogTail)
		}
	}
}

// cutEnd keeps the start of s in at most n bytes (so at most n characters,
// which the schema counts), marking the cut with "...".
func cutEnd(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n-3]
	for len(s) > 0 {
		// A character split by the cut decodes as an error of one byte.
		if r, size := utf8.DecodeLastRuneInString(s); r != utf8.RuneError || size > 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s + "..."
}

// cutStart keeps the end of s in at most n bytes, never splitting a
// character.
func cutStart(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return s
}
