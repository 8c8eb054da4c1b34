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
// changed on disk is never served. The whole store is bounded by MaxBytes:
// past it, the least recently used entries go first, whoever wrote them.
type Store struct {
	Root     string
	MaxBytes int64

	mu      sync.Mutex
	scanned bool
	total   int64
	entries map[string]*entry // by path relative to Root
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
	s.add(rel, int64(2*IDLen+1)+size)
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
			delete(s.entries, rel)
		}
	}
	s.mu.Unlock()
	return os.RemoveAll(filepath.Join(s.Root, env.Namespace, env.Name))
}

// Size is the bytes the store holds.
func (s *Store) Size() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
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
		delete(s.entries, rel)
	}
	_ = os.Remove(filepath.Join(s.Root, rel))
}

// add accounts a written entry and, when the store is over its bound,
// collects the least recently used entries (the new one last of all).
func (s *Store) add(rel string, size int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.entries[rel]; old != nil {
		s.total -= old.size
	}
	s.entries[rel] = &entry{size: size, used: time.Now()}
	s.total += size
	if s.MaxBytes <= 0 || s.total <= s.MaxBytes {
		return
	}
	byUse := make([]string, 0, len(s.entries))
	for p := range s.entries {
		byUse = append(byUse, p)
	}
	slices.SortFunc(byUse, func(a, b string) int { return s.entries[a].used.Compare(s.entries[b].used) })
	// Down to nine tenths of the bound, so a store at its bound does not
	// sort its entries on every write.
	target := s.MaxBytes / 10 * 9
	for _, p := range byUse {
		if s.total <= target {
			break
		}
		s.drop(p)
	}
}
