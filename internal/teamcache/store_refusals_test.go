package teamcache

import (
	"errors"
	"testing"
)

// The store refuses what cannot fit a namespace's share, and bounds one
// namespace's uploads at once; the service says which, so the program
// skips that entry rather than giving up on the cache.
func TestUploadRefusals(t *testing.T) {
	s := &Store{Root: t.TempDir(), MaxBytes: 4 << 20, MaxUploads: 2}
	env := Env{Namespace: "team-b", Name: "dev"}
	if _, err := s.Reserve(env, 3<<20); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("an upload larger than the share: %v, want ErrTooLarge", err)
	}
	r1, err := s.Reserve(env, 1<<10)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := s.Reserve(Env{Namespace: "team-b", Name: "other"}, 1<<10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(env, 1<<10); !errors.Is(err, ErrBusy) {
		t.Fatalf("a third upload of the namespace at once: %v, want ErrBusy", err)
	}
	if r, err := s.Reserve(Env{Namespace: "team-a", Name: "dev"}, 1<<10); err != nil {
		t.Fatalf("another namespace's upload: %v", err)
	} else {
		r.Release()
	}
	r1.Release()
	r1.Release() // twice is once
	if r, err := s.Reserve(env, 1<<10); err != nil {
		t.Fatalf("after one upload ended: %v", err)
	} else {
		r.Release()
	}
	r2.Release()
	if s.Size() != 0 {
		t.Fatalf("released reservations left %d bytes counted", s.Size())
	}
	for _, c := range []struct {
		err     error
		refused bool
	}{{ErrTooLarge, true}, {ErrBusy, true}, {ErrFull, true}} {
		se := &StatusError{Code: statusOf(c.err)}
		if se.refusedEntry() != c.refused {
			t.Errorf("%v answered %d: the program would give up on the cache", c.err, se.Code)
		}
	}
}
