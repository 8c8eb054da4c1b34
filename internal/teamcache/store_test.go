package teamcache

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// The store stays within its bound, dropping the least recently used
// entries of the writer's namespace first (its share is half the
// store); an entry read recently stays.
func TestStoreCollectsLeastRecentlyUsed(t *testing.T) {
	const bound = 20 << 10
	s := &Store{Root: t.TempDir(), MaxBytes: bound}
	a, b := Env{Namespace: "team-a", Name: "dev"}, Env{Namespace: "team-b", Name: "dev"}
	body := strings.Repeat("x", 1<<10)
	entries := make([]testEntry, 60)
	for i := range entries {
		entries[i] = newEntry(fmt.Sprint("action ", i), fmt.Sprint(body, i))
	}
	kept := entries[0]
	if err := s.Put(a, kept.action, kept.output, bytes.NewReader(kept.body), int64(len(kept.body))); err != nil {
		t.Fatal(err)
	}
	for i, e := range entries[1:] {
		env := a
		if i%2 == 0 {
			env = b
		}
		if err := s.Put(env, e.action, e.output, bytes.NewReader(e.body), int64(len(e.body))); err != nil {
			t.Fatal(err)
		}
		// The first entry is read after every write: always the most
		// recently used but one.
		_, r, _, err := s.Get(a, kept.action)
		if err != nil {
			t.Fatalf("after %d writes the entry read all along is gone: %v", i+1, err)
		}
		_ = r.Close()
		if s.Size() > bound {
			t.Fatalf("the store holds %d bytes, over its bound %d", s.Size(), bound)
		}
	}
	if _, _, _, err := s.Get(b, entries[1].action); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the oldest unread entry: %v, want it collected", err)
	}
	last := entries[len(entries)-1]
	if _, r, _, err := s.Get(b, last.action); err != nil { // written by b (even index)
		t.Fatalf("the newest entry: %v", err)
	} else {
		_ = r.Close()
	}
	t.Logf("%d bytes held, bound %d", s.Size(), bound)

	// A new operator process learns the store from disk.
	again := &Store{Root: s.Root, MaxBytes: bound}
	if _, r, _, err := again.Get(a, kept.action); err != nil {
		t.Fatalf("after a restart: %v", err)
	} else {
		_ = r.Close()
	}
	if again.Size() != s.Size() {
		t.Fatalf("after a restart the store counts %d bytes, before %d", again.Size(), s.Size())
	}
}
