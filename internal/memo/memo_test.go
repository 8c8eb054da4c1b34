package memo

import "testing"

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
