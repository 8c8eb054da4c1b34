package liveupdate

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// The tars kept for pods that start later are the newest live update of
// each image only, within maxCachedTarBytes (the newest of all kept
// whatever its size): two environments live-updating an operator-sized
// binary in turn kept eight of them and the operator was OOM-killed.
func TestTheTarsKeptForLaterPodsAreBounded(t *testing.T) {
	e := &Engine{}
	binary := func() map[string][]byte { return map[string][]byte{"": make([]byte, 28<<20)} }
	kept := func() int {
		n := 0
		for _, t := range e.tars {
			n += t.size()
		}
		return n
	}
	for i, to := range []string{"d1", "d2", "d3", "d4", "d5"} {
		for _, env := range []types.UID{"env-a", "env-b"} {
			e.remember(env, "server", "t0", to, binary())
			if n := kept(); n > maxCachedTarBytes && len(e.tars) > 1 {
				t.Fatalf("change %d: %d bytes of tars kept in %d entries, more than %d", i, n, len(e.tars), maxCachedTarBytes)
			}
		}
	}
	if _, ok := e.recall("env-b", "server", "t0", "d5"); !ok {
		t.Error("the newest live update is not kept")
	}
	if _, ok := e.recall("env-b", "server", "t0", "d4"); ok {
		t.Error("a live update superseded by a newer one of the same image is still kept")
	}
	huge := map[string][]byte{"": make([]byte, maxCachedTarBytes+1)}
	e.remember("env-c", "server", "t0", "big", huge)
	if _, ok := e.recall("env-c", "server", "t0", "big"); !ok || len(e.tars) != 1 {
		t.Errorf("the newest live update past the bound: kept %v, %d entries", ok, len(e.tars))
	}
	// Small ones are kept side by side, newest of each image.
	e.remember("env-a", "web", "t0", "w1", map[string][]byte{"": make([]byte, 1<<10)})
	e.remember("env-a", "api", "t0", "a1", map[string][]byte{"": make([]byte, 1<<10)})
	for _, k := range [][2]string{{"web", "w1"}, {"api", "a1"}} {
		if _, ok := e.recall("env-a", k[0], "t0", k[1]); !ok {
			t.Errorf("%s's newest live update is not kept", k[0])
		}
	}
}
