package main

import "testing"

// The Go runtime's soft limit leaves room under the container's limit for
// what it does not count; a small limit keeps at least half.
func TestSoftMemoryLimitLeavesRoom(t *testing.T) {
	for _, tc := range []struct{ limit, want int64 }{
		{512 << 20, 512<<20 - (512<<20)/6},
		{256 << 20, 192 << 20},
		{100 << 20, 50 << 20},
		{4 << 30, 4<<30 - (4<<30)/6},
	} {
		if got := softMemoryLimit(tc.limit); got != tc.want {
			t.Errorf("softMemoryLimit(%d) = %d, want %d", tc.limit, got, tc.want)
		}
	}
}
