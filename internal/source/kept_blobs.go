package source

import (
	"os"
	"slices"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// A binary pushed with --delta names as its base a layer the registry
// already holds, which this process most often fetched a moment ago: the
// mapped layer of the last whole push, kept in its store entry. Downloading
// the base again put the whole binary back on the path of every change.
// keptBlobs remembers, per origin (registry and repository), the store
// files that hold blobs of that origin's artifacts, so a delta's base is
// read from the store when it is there.
//
// Per origin: the registry already lets a manifest of a repository name
// only blobs of that repository, and this process downloaded the blob from
// that repository, so a base found here is one the artifact's reader may
// read. The file is checked against its digest before it is used (the
// store is on a volume); a file that is gone or differs is downloaded.

// keptPerOrigin bounds the blobs remembered for one origin (the last whole
// push's binaries, and their bases).
const keptPerOrigin = 8

type keptBlobs struct {
	mu sync.Mutex
	m  map[string][]keptBlob
}

type keptBlob struct {
	digest v1.Hash
	file   string
}

// remember notes that file holds blob digest of origin, as the newest.
func (k *keptBlobs) remember(origin string, digest v1.Hash, file string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil {
		k.m = map[string][]keptBlob{}
	}
	list := slices.DeleteFunc(k.m[origin], func(b keptBlob) bool { return b.digest == digest })
	list = append(list, keptBlob{digest: digest, file: file})
	if len(list) > keptPerOrigin {
		list = list[len(list)-keptPerOrigin:]
	}
	k.m[origin] = list
}

// forget drops what was remembered of digest in origin.
func (k *keptBlobs) forget(origin string, digest v1.Hash) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.m[origin] = slices.DeleteFunc(k.m[origin], func(b keptBlob) bool { return b.digest == digest })
}

// lookup is the file that holds digest of origin, if one was remembered.
func (k *keptBlobs) lookup(origin string, digest v1.Hash) (string, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, b := range k.m[origin] {
		if b.digest == digest {
			return b.file, true
		}
	}
	return "", false
}

// open is the remembered file of digest, opened and found to be that blob
// (its SHA-256 read through), or false. A file that is gone (its entry
// collected) or differs is forgotten.
func (k *keptBlobs) open(origin string, digest v1.Hash) (*os.File, bool) {
	file, ok := k.lookup(origin, digest)
	if !ok || digest.Algorithm != "sha256" {
		return nil, false
	}
	f, err := os.Open(file)
	if err != nil {
		k.forget(origin, digest)
		return nil, false
	}
	if got, _, err := v1.SHA256(f); err != nil || got != digest {
		_ = f.Close()
		k.forget(origin, digest)
		return nil, false
	}
	return f, true
}
