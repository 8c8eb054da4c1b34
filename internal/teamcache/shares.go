package teamcache

import (
	"errors"
	"slices"
	"time"
)

// Every tenant writes into the same store, on the operator's work volume
// (shared with the source store). So that one tenant cannot take the
// others' entries or the volume (issue 44), as the source store does:
//
//   - a namespace's environments hold at most its share
//     (Store.NamespaceMaxBytes) together; a write past it evicts that
//     namespace's own least recently used entries, never another's;
//   - only past the whole store's bound are the store's least recently
//     used entries evicted, whoever wrote them;
//   - room is reserved before a body is read and counts as written until
//     the upload ends, so uploads in progress cannot hold more than the
//     share on disk, and a namespace has at most Store.MaxUploads at once.

// Refusals of an upload, each for this entry only: the program skips it
// and goes on using the cache.
var (
	// ErrTooLarge is an entry larger than a namespace's share.
	ErrTooLarge = errors.New("the entry is larger than a namespace's share of the build cache")
	// ErrBusy is a namespace with Store.MaxUploads uploads in progress.
	ErrBusy = errors.New("too many uploads of this namespace in progress")
	// ErrFull is a share, or the store, held by uploads in progress.
	ErrFull = errors.New("the build cache is held by uploads in progress")
)

// DefaultMaxUploads is a namespace's uploads at once: a builder pod's
// program runs 4 (prog.go), so two builds of a namespace upload at full
// speed together.
const DefaultMaxUploads = 8

// entryOverhead is what an entry file holds besides its body: the
// output ID in hex and a newline.
const entryOverhead = 2*IDLen + 1

// uploads are one namespace's uploads in progress.
type uploads struct {
	count int
	bytes int64
}

// Reservation is the room of one upload, held from before its body is
// read until it is committed as an entry or released.
type Reservation struct {
	s     *Store
	ns    string
	bytes int64
	done  bool
}

// Reserve takes room for an entry of env whose body is size bytes,
// evicting env's namespace's own least recently used entries when its
// share needs them, then the store's. It is refused with ErrTooLarge,
// ErrBusy or ErrFull.
func (s *Store) Reserve(env Env, size int64) (*Reservation, error) {
	if !env.valid() {
		return nil, errors.New("invalid environment")
	}
	if err := s.scan(); err != nil {
		return nil, err
	}
	need := entryOverhead + size
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := env.Namespace
	share := s.namespaceShare()
	if (share > 0 && need > share) || (s.MaxBytes > 0 && need > s.MaxBytes) {
		return nil, ErrTooLarge
	}
	up := s.uploads[ns]
	if up == nil {
		up = &uploads{}
		s.uploads[ns] = up
	}
	if up.count >= s.maxUploads() {
		return nil, ErrBusy
	}
	if share > 0 {
		mine := func() int64 { return s.byNamespace[ns] + up.bytes }
		if !s.makeRoom(func(rel string) bool { return namespaceOf(rel) == ns }, mine, need, share) {
			return nil, ErrFull
		}
	}
	if s.MaxBytes > 0 {
		all := func() int64 { return s.total + s.reserved("") }
		if !s.makeRoom(func(string) bool { return true }, all, need, s.MaxBytes) {
			return nil, ErrFull
		}
	}
	up.count++
	up.bytes += need
	return &Reservation{s: s, ns: ns, bytes: need}, nil
}

// Release gives the room back (the upload failed, or after commit: a
// no-op). Safe to call more than once.
func (r *Reservation) Release() {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	r.release()
}

// release ends the reservation; s.mu is held.
func (r *Reservation) release() {
	if r.done {
		return
	}
	r.done = true
	up := r.s.uploads[r.ns]
	up.count--
	up.bytes -= r.bytes
	if up.count == 0 {
		delete(r.s.uploads, r.ns)
	}
}

// commit turns the reservation into the entry at rel, just renamed into
// place (replacing any entry there).
func (r *Reservation) commit(rel string) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.entries[rel]; old != nil {
		s.total -= old.size
		s.byNamespace[r.ns] -= old.size
	}
	s.entries[rel] = &entry{size: r.bytes, used: time.Now()}
	s.total += r.bytes
	s.byNamespace[r.ns] += r.bytes
	r.release()
}

// namespaceShare is one namespace's bound, 0 for none; s.mu is held or
// the fields are not changing.
func (s *Store) namespaceShare() int64 {
	switch {
	case s.NamespaceMaxBytes > 0:
		return s.NamespaceMaxBytes
	case s.MaxBytes > 0:
		return s.MaxBytes / 2
	}
	return 0
}

func (s *Store) maxUploads() int {
	if s.MaxUploads > 0 {
		return s.MaxUploads
	}
	return DefaultMaxUploads
}

// reserved is what uploads in progress of ns (every namespace's for "")
// hold; s.mu is held.
func (s *Store) reserved(ns string) int64 {
	var n int64
	for x, up := range s.uploads {
		if ns == "" || x == ns {
			n += up.bytes
		}
	}
	return n
}

// makeRoom evicts the least recently used entries that match until
// used()+need fits limit, and says whether it does. It evicts a tenth of
// limit further, so a store at its bound does not sort its entries on
// every write. s.mu is held.
func (s *Store) makeRoom(match func(rel string) bool, used func() int64, need, limit int64) bool {
	if used()+need <= limit {
		return true
	}
	var victims []string
	for rel := range s.entries {
		if match(rel) {
			victims = append(victims, rel)
		}
	}
	slices.SortFunc(victims, func(a, b string) int { return s.entries[a].used.Compare(s.entries[b].used) })
	target := limit - limit/10
	for _, rel := range victims {
		if used()+need <= target {
			break
		}
		s.drop(rel)
	}
	return used()+need <= limit
}
