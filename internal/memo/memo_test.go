package memo

import (
	"fmt"
	"testing"
)

func TestForgetDropsOnlyThatEnvironment(t *testing.T) {
	var m Map[int]
	m.Put(Key("a", "src"), 1)
	m.Put(Key("a", "base/x"), 2)
	m.Put(Key("ab", "src"), 3)
	m.Forget("a")
	if _, ok := m.Get(Key("a", "src")); ok {
		t.Error("a/src kept")
	}
	if _, ok := m.Get(Key("a", "base/x")); ok {
		t.Error("a/base/x kept")
	}
	if v, ok := m.Get(Key("ab", "src")); !ok || v != 3 {
		t.Errorf("ab/src = %d, %v; want 3, true", v, ok)
	}
}

// TestUpdateCountsInPlaceAndDeleteDrops: Update reads and writes a key
// under one lock (two reconciles counting one try each count two), and
// Delete drops one key.
func TestUpdateCountsInPlaceAndDeleteDrops(t *testing.T) {
	var m Map[int]
	k := Key("a", "job")
	done := make(chan struct{})
	for range 2 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 100 {
				m.Update(k, func(n int, _ bool) int { return n + 1 })
			}
		}()
	}
	<-done
	<-done
	if got := m.Update(k, func(n int, ok bool) int {
		if !ok {
			t.Error("Update: the key counted is not there")
		}
		return n
	}); got != 200 {
		t.Errorf("counted %d, want 200", got)
	}
	m.Delete(k)
	if _, ok := m.Get(k); ok {
		t.Error("Delete kept the key")
	}
}

// TestCountsStartAgainEmptyPastTheBound: Counts hold at most MaxCounts
// keys; a new key past it empties them first (the counts lost cost a
// shorter delay, never memory), a key held is written in place.
func TestCountsStartAgainEmptyPastTheBound(t *testing.T) {
	var c Counts[int]
	for i := range MaxCounts {
		c.Update(Key("env", fmt.Sprint(i)), func(int, bool) int { return i })
	}
	c.Update(Key("env", "0"), func(n int, _ bool) int { return n + 1 }) // held: nothing dropped
	if _, ok := c.Get(Key("env", "1")); !ok {
		t.Fatal("writing a key held dropped the others")
	}
	c.Update(Key("env", "new"), func(int, bool) int { return -1 })
	if _, ok := c.Get(Key("env", "1")); ok {
		t.Error("a key past MaxCounts kept the others: the bound is not held")
	}
	if v, ok := c.Get(Key("env", "new")); !ok || v != -1 {
		t.Errorf("env/new = %d, %v; want -1, true", v, ok)
	}
}
