package source

import (
	"hash/fnv"
	"io/fs"
	"strings"
)

// A pushed tree used to be one layer: a one-line edit uploaded the whole
// tree, which on a laptop's uplink to a remote cluster is seconds for a
// real project (issue 46). The tree is now split into layers at places
// that depend only on directory names, never on sizes before them, so an
// edit changes the one layer that holds the file, and the registry
// already has the others: the push uploads that layer alone. A small tree
// stays one layer, byte for byte what it was.

const (
	// chunkCut is how often (one directory in chunkCut, by the hash of its
	// path) a directory may begin a new layer...
	chunkCut = 8
	// ...once the layer before it holds at least chunkMin bytes.
	chunkMin = 256 << 10
	// chunkMax cuts a layer of one huge directory wherever it reaches it
	// (an edit there may then move the cuts after it).
	chunkMax = 8 << 20
	// chunkOwn is the size from which a file is a layer of its own (a
	// binary in the tree, a data file).
	chunkOwn = 2 << 20
)

// treeEntry is one entry of a tree being packed, in lexical order.
type treeEntry struct {
	path, rel string
	dir       bool
	size      int64
	d         fs.DirEntry
}

// splitTree cuts entries (lexical order, parents before their contents)
// into the layers of an artifact: before a directory whose path hash says
// so once the current layer has chunkMin bytes, around a file of chunkOwn
// bytes or more, and wherever a layer reaches chunkMax. Parents come
// before children, so every layer's parents are in it or before it.
func splitTree(entries []treeEntry) [][]treeEntry {
	var out [][]treeEntry
	var cur []treeEntry
	var size int64
	cut := func() {
		if len(cur) > 0 {
			out = append(out, cur)
		}
		cur, size = nil, 0
	}
	for _, e := range entries {
		switch {
		case !e.dir && e.size >= chunkOwn:
			cut()
			out = append(out, []treeEntry{e})
			continue
		case size >= chunkMax,
			e.dir && size >= chunkMin && beginsChunk(e.rel):
			cut()
		}
		cur = append(cur, e)
		size += e.size + 512 // and its header
	}
	cut()
	if len(out) == 0 {
		// An empty tree is one empty layer, as it always was.
		out = append(out, nil)
	}
	return out
}

// beginsChunk says whether directory rel may begin a layer.
func beginsChunk(rel string) bool {
	h := fnv.New32a()
	h.Write([]byte(strings.TrimSuffix(rel, "/")))
	return h.Sum32()%chunkCut == 0
}
