package liveupdate

import (
	"slices"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"k8s.io/apimachinery/pkg/types"
)

// What the engine remembers between live updates is kept per
// environment (by UID): two tenants' images may name the same digests
// or layer IDs, and what one tenant's images say must never stand for
// another's. A listing is also keyed by the layer's compressed digest
// (what a registry checks) besides its diff ID (what an image's config
// claims), and made only from bytes that hash to that diff ID
// (layerEntries).

// cachedTar is one live update's tars, by platform (plan).
type cachedTar struct {
	env             types.UID
	image, from, to string
	data            map[string][]byte
}

// maxCachedTars bounds the live updates whose tars are kept in memory,
// and maxCachedTarBytes their bytes: an operator keeping the last eight
// of two environments' 28.5 MiB binaries was OOM-killed (512 MiB). Only
// the newest live update of an image is kept (a pod started later is
// synced to the newest), and the newest of all is kept whatever its size;
// a live update no longer here is planned again when a pod needs it.
const (
	maxCachedTars     = 8
	maxCachedTarBytes = 64 << 20
)

func (e *Engine) remember(env types.UID, image, from, to string, data map[string][]byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tars = slices.DeleteFunc(e.tars, func(t cachedTar) bool { return t.env == env && t.image == image })
	e.tars = append(e.tars, cachedTar{env: env, image: image, from: from, to: to, data: data})
	total := 0
	for _, t := range e.tars {
		total += t.size()
	}
	for len(e.tars) > 1 && (len(e.tars) > maxCachedTars || total > maxCachedTarBytes) {
		total -= e.tars[0].size()
		e.tars = e.tars[1:]
	}
}

func (t cachedTar) size() int {
	n := 0
	for _, d := range t.data {
		n += len(d)
	}
	return n
}

func (e *Engine) recall(env types.UID, image, from, to string) (map[string][]byte, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, t := range e.tars {
		if t.env == env && t.image == image && t.from == from && t.to == to {
			return t.data, true
		}
	}
	return nil, false
}

// layerKey names one environment's listing of one layer.
type layerKey struct {
	env            types.UID
	digest, diffID v1.Hash
}

// cachedEntries is one layer's listing.
type cachedEntries struct {
	key     layerKey
	entries map[string]entry
}

// maxCachedLayers bounds the listings kept in memory.
const maxCachedLayers = 16

// entriesOf lists layers for the environment env, from memory when it
// listed the same layer lately (then nothing is kept: WriteTar reads the
// changed files from the layer).
func (e *Engine) entriesOf(env types.UID) lister {
	return func(l v1.Layer, keep func(string, *entry) bool, budget int64) (map[string]entry, map[string]*keptFile, error) {
		digest, err := l.Digest()
		if err != nil {
			return nil, nil, err
		}
		diffID, err := l.DiffID()
		if err != nil {
			return nil, nil, err
		}
		key := layerKey{env: env, digest: digest, diffID: diffID}
		if entries, ok := e.cachedListing(key); ok {
			return entries, nil, nil
		}
		entries, kept, err := layerEntriesKeeping(l, keep, budget)
		if err != nil {
			return nil, nil, err
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		e.entries = append(e.entries, cachedEntries{key: key, entries: entries})
		if len(e.entries) > maxCachedLayers {
			e.entries = e.entries[1:]
		}
		return entries, kept, nil
	}
}

func (e *Engine) cachedListing(key layerKey) (map[string]entry, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range e.entries {
		if c.key == key {
			return c.entries, true
		}
	}
	return nil, false
}

// forget drops what is remembered for the environment env.
func (e *Engine) forget(env types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tars = slices.DeleteFunc(e.tars, func(t cachedTar) bool { return t.env == env })
	e.entries = slices.DeleteFunc(e.entries, func(c cachedEntries) bool { return c.key.env == env })
}
