package memo

import "k8s.io/apimachinery/pkg/types"

// MaxCounts bounds the keys a Counts holds.
const MaxCounts = 256

// Counts are counts of failures in a row (a builder Job stopped by the
// registry down, a registry host that does not resolve), by key
// "<environment UID>/<anything>", held to MaxCounts keys: a new key past
// it empties them first. A build failing for ever new inputs would
// otherwise grow them without end; a count lost costs a shorter delay.
// The zero value is ready to use and safe for concurrent reconciles.
type Counts[T any] struct{ m Map[T] }

// Update stores what f makes of the value under key (the zero value and
// false when there is none) and returns it, under one lock.
func (c *Counts[T]) Update(key string, f func(old T, ok bool) T) T {
	return c.m.update(key, f, MaxCounts)
}

// Get returns the value under key.
func (c *Counts[T]) Get(key string) (T, bool) { return c.m.Get(key) }

// Delete drops key: what it counted succeeded, or stopped failing.
func (c *Counts[T]) Delete(key string) { c.m.Delete(key) }

// Forget drops an environment's counts when it is deleted.
func (c *Counts[T]) Forget(uid types.UID) { c.m.Forget(uid) }
