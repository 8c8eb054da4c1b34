// Package memo is the operator's in-memory record of what it asked
// outside recently (a branch resolved, a base image's digest, a push
// verified), per environment, so it asks once per interval and not on
// every reconcile. A restart forgets it, which costs one request each.
package memo

import (
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Map holds values under keys "<environment UID>/<anything>". The zero
// value is ready to use and safe for concurrent reconciles.
type Map[T any] struct {
	mu sync.Mutex
	m  map[string]T
}

// Key is the key of name for the environment uid.
func Key(uid types.UID, name string) string { return string(uid) + "/" + name }

// Get returns the value under key.
func (c *Map[T]) Get(key string) (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[key]
	return v, ok
}

// Put stores v under key.
func (c *Map[T]) Put(key string, v T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.store(key, v, 0)
}

// Update stores what f makes of the value under key (the zero value and
// false when there is none) and returns it, under one lock: a count two
// reconciles raise at once is raised twice.
func (c *Map[T]) Update(key string, f func(old T, ok bool) T) T {
	return c.update(key, f, 0)
}

func (c *Map[T]) update(key string, f func(old T, ok bool) T, max int) T {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, ok := c.m[key]
	v := f(old, ok)
	c.store(key, v, max)
	return v
}

// Delete drops key.
func (c *Map[T]) Delete(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
}

// store puts v under key; a new key past max (when not 0) empties the
// map first. c.mu is held.
func (c *Map[T]) store(key string, v T, max int) {
	if _, held := c.m[key]; !held && max > 0 && len(c.m) >= max {
		c.m = nil
	}
	if c.m == nil {
		c.m = map[string]T{}
	}
	c.m[key] = v
}

// Forget drops an environment's entries when it is deleted.
func (c *Map[T]) Forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	prefix := string(uid) + "/"
	for k := range c.m {
		if strings.HasPrefix(k, prefix) {
			delete(c.m, k)
		}
	}
}
