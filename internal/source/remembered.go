package source

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Remembered holds, per repository, the blobs of the last manifest a
// Pusher pushed there: in memory for a `push --watch`, and in a file per
// repository under Dir (when set) for the next `push` process. It is only
// a hint: a blob the registry lost makes the manifest refused and the
// push asks again (Pusher.Push). A nil *Remembered remembers nothing.
type Remembered struct {
	// Dir keeps one small file per repository; "" keeps nothing on disk.
	Dir string

	mu    sync.Mutex
	blobs map[string]map[v1.Hash]bool
}

// rememberedFile is what Dir holds for one repository.
type rememberedFile struct {
	Repository string    `json:"repository"`
	Blobs      []v1.Hash `json:"blobs"`
}

// maxRemembered bounds the blobs read back for one repository (a tree is
// tens of layers; anything larger is not a file this wrote).
const maxRemembered = 4096

// Blobs are the blobs remembered for repo (nil for none).
func (m *Remembered) Blobs(repo string) map[v1.Hash]bool {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if b, ok := m.blobs[repo]; ok {
		return b
	}
	if m.Dir == "" {
		return nil
	}
	data, err := os.ReadFile(m.file(repo))
	if err != nil {
		return nil
	}
	var f rememberedFile
	if json.Unmarshal(data, &f) != nil || f.Repository != repo || len(f.Blobs) > maxRemembered {
		return nil
	}
	b := map[v1.Hash]bool{}
	for _, h := range f.Blobs {
		b[h] = true
	}
	m.set(repo, b)
	return b
}

// Remember replaces what is remembered for repo by blobs. Failing to
// write the file only costs the next process its HEADs.
func (m *Remembered) Remember(repo string, blobs []v1.Hash) {
	if m == nil {
		return
	}
	b := map[v1.Hash]bool{}
	for _, h := range blobs {
		b[h] = true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.set(repo, b)
	if m.Dir == "" {
		return
	}
	data, err := json.Marshal(rememberedFile{Repository: repo, Blobs: blobs})
	if err != nil || os.MkdirAll(m.Dir, 0o700) != nil {
		return
	}
	// Written aside and renamed, so a concurrent push never reads half.
	tmp, err := os.CreateTemp(m.Dir, ".pushed-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(data)
	if cerr := tmp.Close(); werr != nil || cerr != nil || os.Rename(tmp.Name(), m.file(repo)) != nil {
		os.Remove(tmp.Name())
	}
}

// Forget drops what is remembered for repo.
func (m *Remembered) Forget(repo string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.blobs, repo)
	if m.Dir != "" {
		os.Remove(m.file(repo))
	}
}

func (m *Remembered) set(repo string, b map[v1.Hash]bool) {
	if m.blobs == nil {
		m.blobs = map[string]map[v1.Hash]bool{}
	}
	m.blobs[repo] = b
}

// file is repo's file: named by a hash, as a repository holds slashes and
// a port's colon.
func (m *Remembered) file(repo string) string {
	sum := sha256.Sum256([]byte(repo))
	return filepath.Join(m.Dir, hex.EncodeToString(sum[:16])+".json")
}
