package engine

import "sync"

// Pass is what one reconcile's engine calls share: a value an engine makes
// once per reconcile and reuses for every component (a registry client
// and its credentials), and drops with the reconcile.
type Pass struct {
	mu     sync.Mutex
	values map[any]any
}

// Shared returns the value p holds under key, made by make on first use.
// A nil Pass shares nothing: every call makes a new value.
func Shared[T any](p *Pass, key any, make func() T) T {
	if p == nil {
		return make()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if v, ok := p.values[key]; ok {
		return v.(T)
	}
	if p.values == nil {
		p.values = map[any]any{}
	}
	v := make()
	p.values[key] = v
	return v
}
