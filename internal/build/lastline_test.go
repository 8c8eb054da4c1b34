package build

import "testing"

func TestLastBuildLineSkipsTheCacheSummary(t *testing.T) {
	for tail, want := range map[string]string{
		"./main.go:3:2: undefined: undefinedName\ndevloop build cache: 121 entries from the team cache, 2 uploaded\n": "./main.go:3:2: undefined: undefinedName",
		"compiled\n":                  "compiled",
		"devloop build cache: only\n": "devloop build cache: only",
		"":                            "",
	} {
		if got := lastBuildLine(tail); got != want {
			t.Errorf("lastBuildLine(%q) = %q, want %q", tail, got, want)
		}
	}
}
