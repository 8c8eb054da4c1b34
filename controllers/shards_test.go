package controllers_test

import (
	"testing"

	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestShardsRunEveryTestOnce: the shards' groups hold every Test function
// of the package once, this one among them.
func TestShardsRunEveryTestOnce(t *testing.T) {
	names, err := operatortest.TestNames(".")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, g := range operatortest.Split(names, 3) {
		for _, n := range g {
			seen[n]++
		}
	}
	if len(seen) != len(names) || seen["TestShardsRunEveryTestOnce"] != 1 || seen["TestListOrderNeverChangesTheOutcome"] != 1 {
		t.Fatalf("%d names, %d in the groups: %v", len(names), len(seen), seen)
	}
	for n, c := range seen {
		if c != 1 {
			t.Errorf("%s is in %d groups", n, c)
		}
	}
}
