package teamcache

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ErrCorrupt is an entry whose body does not hash to its output ID: it is
// removed and never served.
var ErrCorrupt = errors.New("cache entry does not match its output ID")

// ErrNotFound is a miss.
var ErrNotFound = errors.New("no cache entry")

// IDLen is the length of Go's action and output IDs (SHA-256).
const IDLen = sha256.Size

// Env names one environment's part of the store.
type Env struct{ Namespace, Name string }

func (e Env) String() string { return e.Namespace + "/" + e.Name }

// valid says whether e can name a directory: a namespace (DNS label) and
// an object name (DNS subdomain), so neither holds a separator or "..".
func (e Env) valid() bool {
	return len(validation.IsDNS1123Label(e.Namespace)) == 0 && len(validation.IsDNS1123Subdomain(e.Name)) == 0
}

// Store is the operator's content-addressed store of Go build cache
// entries, one directory per environment: ROOT/NAMESPACE/NAME/ACTION, each
// file the output ID in hex, a newline, and the body. A body is checked
// against its output ID (SHA-256 of the bytes, as the go command computes
// it) when it is written and again every time it is read, so a file
// changed on disk is never served.
//
// The store is shared by every tenant, so it is bounded per namespace as
// well as whole (shares.go): an upload reserves its room before its body
// is read, within its namespace's share, evicting that namespace's own
// least recently used entries first and then the store's; a namespace
// has at most MaxUploads uploads at once.
type Store struct {
	Root string
	// MaxBytes bounds the whole store, uploads in progress included (0:
	// unbounded).
	MaxBytes int64
	// NamespaceMaxBytes bounds what the environments of one namespace
	// hold together (0: half of MaxBytes).
	NamespaceMaxBytes int64
	// MaxUploads bounds one namespace's uploads at once
	// (DefaultMaxUploads).
	MaxUploads int

	mu      sync.Mutex
	scanned bool
	total   int64
	entries map[string]*entry // by path relative to Root
	// byNamespace is what each namespace's entries hold; uploads, what
	// its uploads in progress have reserved.
	byNamespace map[string]int64
	uploads     map[string]*uploads
}

type entry struct {
	size int64
	used time.Time
}

// tmpDir holds files being written, outside every environment's directory.
const tmpDir = ".tmp"

func (s *Store) path(env Env, action []byte) (string, error) {
	if !env.valid() {
		return "", fmt.Errorf("invalid environment %q", env)
	}
	if len(action) != IDLen {
		return "", fmt.Errorf("an action ID has %d bytes, not %d", IDLen, len(action))
	}
	return filepath.Join(env.Namespace, env.Name, hex.EncodeToString(action)), nil
}

// Get opens env's entry for action: its output ID, a reader of its body
// (already checked against the ID) and the body's size. ErrNotFound is a
// miss, ErrCorrupt an entry that was removed because its body did not
// match.
func (s *Store) Get(env Env, action []byte) (output []byte, body io.ReadCloser, size int64, err error) {
	rel, err := s.path(env, action)
	if err != nil {
		return nil, nil, 0, err
	}
	if err := s.scan(); err != nil {
		return nil, nil, 0, err
	}
	f, err := os.Open(filepath.Join(s.Root, rel))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, 0, ErrNotFound
	}
	if err != nil {
		return nil, nil, 0, err
	}
	output, offset, size, err := checkEntry(f)
	if err != nil {
		_ = f.Close()
		if errors.Is(err, ErrCorrupt) {
			s.remove(rel)
		}
		return nil, nil, 0, err
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		_ = f.Close()
		return nil, nil, 0, err
	}
	s.touch(rel)
	return output, f, size, nil
}

// checkEntry reads an entry file through: its output ID, where the body
// starts and its size, or ErrCorrupt.
func checkEntry(f *os.File) (output []byte, offset, size int64, err error) {
	r := bufio.NewReader(f)
	line, err := r.ReadString('\n')
	if err != nil || len(line) != 2*IDLen+1 {
		return nil, 0, 0, ErrCorrupt
	}
	if output, err = hex.DecodeString(line[:2*IDLen]); err != nil {
		return nil, 0, 0, ErrCorrupt
	}
	h := sha256.New()
	if size, err = io.Copy(h, r); err != nil {
		return nil, 0, 0, err
	}
	if !slices.Equal(h.Sum(nil), output) {
		return nil, 0, 0, ErrCorrupt
	}
	return output, int64(len(line)), size, nil
}

// Put stores body (size bytes, whose SHA-256 must be output) as env's
// entry for action. A body that does not match is refused (ErrCorrupt)
// and nothing is written.
func (s *Store) Put(env Env, action, output []byte, body io.Reader, size int64) error {
	rel, err := s.path(env, action)
	if err != nil {
		return err
	}
	if len(output) != IDLen {
		return fmt.Errorf("an output ID has %d bytes, not %d", IDLen, len(output))
	}
	if err := s.scan(); err != nil {
		return err
	}
	// The room is taken before a byte of the body is read: what is being
	// written counts as written.
	room, err := s.Reserve(env, size)
	if err != nil {
		return err
	}
	defer room.Release()
	if err := os.MkdirAll(filepath.Join(s.Root, tmpDir), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Join(s.Root, tmpDir), "put-")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	h := sha256.New()
	_, _ = fmt.Fprintf(tmp, "%x\n", output)
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(body, size+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if n != size || !slices.Equal(h.Sum(nil), output) {
		return ErrCorrupt
	}
	dst := filepath.Join(s.Root, rel)
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	// The rename is atomic: a reader sees the old entry or the new one.
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return err
	}
	room.commit(rel)
	return nil
}

// Forget removes every entry of env (the environment was deleted).
func (s *Store) Forget(env Env) error {
	if !env.valid() {
		return fmt.Errorf("invalid environment %q", env)
	}
	if err := s.scan(); err != nil {
		return err
	}
	prefix := filepath.Join(env.Namespace, env.Name) + string(filepath.Separator)
	s.mu.Lock()
	for rel, e := range s.entries {
		if strings.HasPrefix(rel, prefix) {
			s.total -= e.size
			s.byNamespace[env.Namespace] -= e.size
			delete(s.entries, rel)
		}
	}
	s.mu.Unlock()
	return os.RemoveAll(filepath.Join(s.Root, env.Namespace, env.Name))
}

// Size is the bytes the store holds, uploads in progress included.
func (s *Store) Size() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total + s.reserved("")
}

// scan learns what a store left by an earlier operator process holds,
// once, with the files' modification times as their last use.
func (s *Store) scan() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.scanned {
		return nil
	}
	s.entries = map[string]*entry{}
	s.byNamespace = map[string]int64{}
	s.uploads = map[string]*uploads{}
	_ = os.RemoveAll(filepath.Join(s.Root, tmpDir))
	err := filepath.WalkDir(s.Root, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		rel, err := filepath.Rel(s.Root, p)
		if err != nil {
			return err
		}
		s.entries[rel] = &entry{size: info.Size(), used: info.ModTime()}
		s.total += info.Size()
		s.byNamespace[namespaceOf(rel)] += info.Size()
		return nil
	})
	if err != nil {
		return err
	}
	s.scanned = true
	return nil
}

func (s *Store) touch(rel string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[rel]; e != nil {
		e.used = time.Now()
	}
}

func (s *Store) remove(rel string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drop(rel)
}

// drop removes one entry; s.mu is held.
func (s *Store) drop(rel string) {
	if e := s.entries[rel]; e != nil {
		s.total -= e.size
		s.byNamespace[namespaceOf(rel)] -= e.size
		delete(s.entries, rel)
	}
	_ = os.Remove(filepath.Join(s.Root, rel))
}

// namespaceOf is the namespace of the entry at rel.
func namespaceOf(rel string) string {
	ns, _, _ := strings.Cut(rel, string(filepath.Separator))
	return ns
}
