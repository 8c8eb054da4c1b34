package v1alpha1

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestBoundCutsFreeText(t *testing.T) {
	long := strings.Repeat("é", 5000) // two bytes each: a cut may fall inside one
	s := DevEnvironmentStatus{
		LastHandledTrigger: long,
		Sources:            []SourceStatus{{Name: "app", Revision: long}},
		Components: []ComponentStatus{{Name: "web", Message: long, Drift: make([]string, 20),
			Images: []ImageStatus{{Name: "web", UpdateReason: long, Build: &BuildStatus{LogTail: long}}}}},
		Tests: []TestStatus{{Name: "unit", Message: long, Runs: []TestRun{{Trigger: long, Message: long, LogTail: long}}}},
	}
	s.Bound()
	for what, got := range map[string]struct {
		s string
		n int
	}{
		"lastHandledTrigger": {s.LastHandledTrigger, MaxLastHandledTrigger},
		"source revision":    {s.Sources[0].Revision, MaxSourceRevision},
		"component message":  {s.Components[0].Message, MaxComponentMessage},
		"update reason":      {s.Components[0].Images[0].UpdateReason, MaxUpdateReason},
		"build log tail":     {s.Components[0].Images[0].Build.LogTail, MaxBuildLogTail},
		"test message":       {s.Tests[0].Message, MaxTestMessage},
		"run trigger":        {s.Tests[0].Runs[0].Trigger, MaxRunTrigger},
		"run message":        {s.Tests[0].Runs[0].Message, MaxRunMessage},
		"run log tail":       {s.Tests[0].Runs[0].LogTail, MaxRunLogTail},
	} {
		if len(got.s) > got.n || len(got.s) < got.n-4 || !utf8.ValidString(got.s) {
			t.Errorf("%s: %d bytes (valid UTF-8: %v), want at most %d and close to it", what, len(got.s), utf8.ValidString(got.s), got.n)
		}
	}
	if !strings.HasSuffix(s.Components[0].Message, "...") || !strings.HasPrefix(s.Tests[0].Runs[0].LogTail, "é") {
		t.Errorf("messages keep their start and mark the cut, log tails keep their end")
	}
	if len(s.Components[0].Drift) != MaxDriftLines {
		t.Errorf("drift: %d lines, want %d", len(s.Components[0].Drift), MaxDriftLines)
	}
}
