package source

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"k8s.io/apimachinery/pkg/types"

	"github.com/devloop-dev/devloop/internal/memo"
)

// What the store keeps in memory about itself, one state per Store (every
// Fetcher copy of one store shares it). The rules are in the package doc.

// pathOverhead is what each path of an entry costs beyond its bytes: a
// million empty files are not free either.
const pathOverhead = 512

// orphanTTL is how long an entry no environment is charged for (left from
// before an operator restart) stays unused before it is removed.
const orphanTTL = time.Hour

// envTTL is how long an environment that is neither seen nor forgotten
// (deleted while the operator was away) keeps its entries in use.
const envTTL = 24 * time.Hour

type storeState struct {
	mu      sync.Mutex
	scanned bool
	entries map[string]*entryState
	envs    map[types.UID]*envState
	// namespaces are the environments' namespaces, as ServeIn and UsingIn
	// were told: the store's share is per namespace.
	namespaces map[types.UID]string
	// refusals are the fetches refused, by entry (refusals.go).
	refusals map[string]*refusal
	// inflight are the bytes fetches in progress have written so far, by
	// entry (inflight.go).
	inflightFills map[string]inflightFill
	// checks holds the last positive access check of each environment's
	// source, under memo.Key(env, source name): one per source, so an
	// environment moving through many revisions does not grow it.
	checks memo.Map[accessCheck]
}

// accessCheck is a positive access check of one entry with one version of
// the credentials.
type accessCheck struct {
	key string // storeKey + "\x00" + credentials version
	at  time.Time
}

type entryState struct {
	size int64
	used time.Time
	// holds counts Fetch and Serve calls reading or writing the entry.
	holds int
	// charged are the environments it counts against.
	charged map[types.UID]bool
	// released is set when the last environment charged for it was
	// forgotten: nobody will ask for it again.
	released bool
}

type envState struct {
	// current are the entries of its sources' latest resolution.
	current map[string]bool
	seen    time.Time
}

// Store is what one operator keeps in memory about its content store:
// the entries, what they are charged to and who holds them (storeState),
// and the locks that serialise fetches of one entry. Every copy of a
// Fetcher (ReadingWith) shares its Store; operator.New gives its Fetcher
// one, so two operators in one process share none of it, as two
// processes would not.
type Store struct {
	state *storeState
	locks *keyLocks
	// kept are the blobs of mapped layers and delta bases the entries
	// hold, for a delta's base (kept_blobs.go).
	kept keptBlobs
}

// NewStore is an empty Store: a new process's, which learns what the
// directory holds from disk on first use.
func NewStore() *Store {
	return &Store{
		state: &storeState{
			entries:       map[string]*entryState{},
			envs:          map[types.UID]*envState{},
			namespaces:    map[types.UID]string{},
			refusals:      map[string]*refusal{},
			inflightFills: map[string]inflightFill{},
		},
		locks: &keyLocks{m: map[string]*keyLock{}},
	}
}

// store is f's Store, made on first use when f was given none (a helper
// pod's private store, a test's): set once, without a lock, so a Fetcher
// stays a plain value its copies share the Store of.
func (f *Fetcher) store() *Store {
	p := (*unsafe.Pointer)(unsafe.Pointer(&f.Store))
	if s := atomic.LoadPointer(p); s != nil {
		return (*Store)(s)
	}
	atomic.CompareAndSwapPointer(p, nil, unsafe.Pointer(NewStore()))
	return (*Store)(atomic.LoadPointer(p))
}

func (f *Fetcher) state() *storeState { return f.store().state }

// scan learns what the store holds from disk, once per Store. Entries
// found are charged to nobody until an environment is served them.
func (st *storeState) scan(root string) {
	if st.scanned {
		return
	}
	st.scanned = true
	des, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, de := range des {
		if !de.IsDir() || de.Name() == tmpDir || st.entries[de.Name()] != nil {
			continue
		}
		info, err := de.Info()
		if err != nil {
			continue
		}
		st.entries[de.Name()] = &entryState{size: entrySize(filepath.Join(root, de.Name())), used: info.ModTime(), charged: map[types.UID]bool{}}
	}
}

// entrySize is what an entry takes: every path's bytes, a hard link's as
// much as its first name's, plus pathOverhead each.
func entrySize(dir string) int64 {
	var total int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		total += pathOverhead
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	return total
}

// Using records the entries of env's sources as just resolved: they stay
// in use (not evicted) until env resolves to others or is forgotten.
func (f *Fetcher) Using(env types.UID, refs ...Ref) {
	f.UsingIn("", env, refs...)
}

// UsingIn is Using for an environment of namespace, whose share of the
// store it counts against.
func (f *Fetcher) UsingIn(namespace string, env types.UID, refs ...Ref) {
	if f.Root == "" || env == "" {
		return
	}
	st := f.state()
	st.mu.Lock()
	defer st.mu.Unlock()
	st.setNamespace(env, namespace)
	cur := map[string]bool{}
	for _, r := range refs {
		if name, err := entryName(r.storeKey()); err == nil {
			cur[name] = true
		}
	}
	st.envs[env] = &envState{current: cur, seen: time.Now()}
}

// Forget drops what the store keeps for a deleted environment: its access
// checks, its charges, and the entries nobody else uses.
func (f *Fetcher) Forget(env types.UID) {
	if f.Root == "" {
		return
	}
	st := f.state()
	st.checks.Forget(env)
	st.mu.Lock()
	delete(st.envs, env)
	delete(st.namespaces, env)
	var gone []string
	st.uncharge(env)
	gone = st.collect(f.Root, time.Now())
	st.mu.Unlock()
	removeEvicted(gone)
}

// inUse says whether an entry may not be evicted now: it is being read or
// written, or it is the current content of an environment that was served
// it (naming content in a spec, without passing its access check, keeps
// nothing alive).
func (st *storeState) inUse(name string, e *entryState) bool {
	if e.holds > 0 {
		return true
	}
	for uid, u := range st.envs {
		if u.current[name] && e.charged[uid] {
			return true
		}
	}
	return false
}

// collect forgets environments not seen for envTTL, and evicts entries no
// environment is charged for: at once when a forgotten environment left
// them, after orphanTTL unused when they predate this process. Called
// with st.mu held; the returned directories are removed by the caller
// after unlocking.
func (st *storeState) collect(root string, now time.Time) []string {
	for uid, u := range st.envs {
		if now.Sub(u.seen) > envTTL {
			delete(st.envs, uid)
			delete(st.namespaces, uid)
			st.uncharge(uid)
		}
	}
	var gone []string
	for name, e := range st.entries {
		if e.size < 0 || len(e.charged) > 0 || st.inUse(name, e) {
			continue
		}
		if !e.released && now.Sub(e.used) < orphanTTL {
			continue
		}
		if dir := st.evict(root, name); dir != "" {
			gone = append(gone, dir)
		}
	}
	return gone
}

// uncharge drops env's charges.
func (st *storeState) uncharge(env types.UID) {
	for _, e := range st.entries {
		if e.charged[env] {
			delete(e.charged, env)
			e.released = len(e.charged) == 0
		}
	}
}

// evict takes an entry out of the store at once (a rename under .tmp) and
// returns what is left to remove, "" when there is nothing.
func (st *storeState) evict(root, name string) string {
	delete(st.entries, name)
	tmpRoot := filepath.Join(root, tmpDir)
	if err := os.MkdirAll(tmpRoot, 0o755); err != nil {
		return ""
	}
	dst, err := os.MkdirTemp(tmpRoot, "evicted-")
	if err != nil {
		return ""
	}
	if err := os.Rename(filepath.Join(root, name), filepath.Join(dst, "entry")); err != nil {
		_ = os.Remove(dst)
		return ""
	}
	return dst
}

func removeEvicted(dirs []string) {
	for _, d := range dirs {
		_ = os.RemoveAll(d)
	}
}

func (f *Fetcher) maxEnvBytes() int64 {
	switch {
	case f.MaxEnvBytes > 0:
		return f.MaxEnvBytes
	case f.MaxStoreBytes > 0:
		return f.MaxStoreBytes / 2
	}
	return 0
}

// hold marks an entry in use by a Fetch or Serve, before it is loaded, so
// it cannot be evicted while it is being read; env (when set) uses it from
// now on. The returned func ends the hold.
func (f *Fetcher) hold(name string, env types.UID) func() {
	st := f.state()
	st.mu.Lock()
	defer st.mu.Unlock()
	st.scan(f.Root)
	e := st.entries[name]
	if e == nil {
		// Not stored yet (or stored by another process): a placeholder
		// that admit fills in.
		e = &entryState{size: -1, charged: map[types.UID]bool{}}
		st.entries[name] = e
	}
	e.holds++
	if env != "" {
		u := st.envs[env]
		if u == nil {
			u = &envState{current: map[string]bool{}}
			st.envs[env] = u
		}
		u.current[name] = true
		u.seen = time.Now()
	}
	return func() {
		st.mu.Lock()
		defer st.mu.Unlock()
		e.holds--
		if e.holds == 0 && e.size < 0 && st.entries[name] == e {
			delete(st.entries, name) // the fill failed
		}
	}
}

// admit makes room for an entry of size bytes about to be served to env
// (written when fresh, or found in the store), and records it: env's own
// unused entries go first when its share is exceeded, then the least
// recently used unused entries of the store. An entry that does not fit
// the share with env's sources in use is a Permanent error naming the
// source; one that does not fit the store for others' sources in use is
// Unavailable.
//
// size is the fresh entry's, or -1 for an entry found in the store.
func (f *Fetcher) admit(s subject, name string, size int64, env types.UID) error {
	st := f.state()
	if size < 0 {
		st.mu.Lock()
		known := int64(-1)
		if e := st.entries[name]; e != nil {
			known = e.size
		}
		st.mu.Unlock()
		if size = known; size < 0 {
			size = entrySize(filepath.Join(f.Root, name))
		}
	}
	st.mu.Lock()
	gone, err := st.admit(f, s, name, size, env)
	st.mu.Unlock()
	removeEvicted(gone)
	return err
}

func (st *storeState) admit(f *Fetcher, s subject, name string, size int64, env types.UID) ([]string, error) {
	now := time.Now()
	e := st.entries[name]
	if e == nil {
		e = &entryState{size: -1, charged: map[types.UID]bool{}}
		st.entries[name] = e
	}
	fresh := e.size < 0
	if fresh {
		e.size = size
	}
	e.used = now
	gone := st.collect(f.Root, now)

	group := st.group(env)
	if share := f.maxEnvBytes(); env != "" && share > 0 && !st.chargedTo(e, group) {
		if size > share {
			return gone, st.refuse(s, name, fresh, fmt.Sprintf("needs %d bytes, more than a namespace's share of the source store (%d bytes)", size, share))
		}
		charged := func() int64 {
			var n int64
			for x, xe := range st.entries {
				if st.chargedTo(xe, group) {
					n += xe.size
				}
				if x != name {
					n += st.inflightIn(x, group)
				}
			}
			return n
		}
		for _, victim := range st.lru(func(n string, x *entryState) bool { return n != name && st.chargedTo(x, group) }) {
			if charged()+size <= share {
				break
			}
			for uid := range st.entries[victim].charged {
				if st.group(uid) == group {
					delete(st.entries[victim].charged, uid)
				}
			}
			if len(st.entries[victim].charged) == 0 {
				if dir := st.evict(f.Root, victim); dir != "" {
					gone = append(gone, dir)
				}
			}
		}
		if used := charged(); used+size > share {
			return gone, st.refuse(s, name, fresh, fmt.Sprintf("needs %d bytes; this namespace's share of the source store is %d bytes and its sources in use hold %d", size, share, used))
		}
	}
	if limit := f.MaxStoreBytes; limit > 0 && fresh {
		total := func() int64 {
			var n int64
			for x, e := range st.entries {
				if x != name && e.size > 0 {
					n += e.size
				}
			}
			for x, b := range st.inflightFills {
				if x != name {
					n += b.bytes
				}
			}
			return n
		}
		if size > limit {
			return gone, st.refuse(s, name, fresh, fmt.Sprintf("needs %d bytes, more than the whole source store (%d bytes)", size, limit))
		}
		for _, victim := range st.lru(func(n string, _ *entryState) bool { return n != name }) {
			if total()+size <= limit {
				break
			}
			if dir := st.evict(f.Root, victim); dir != "" {
				gone = append(gone, dir)
			}
		}
		if used := total(); used+size > limit {
			e.size = -1
			return gone, s.unavailable("the source store is full: %d of its %d bytes hold sources in use, %d more are needed", used, limit, size)
		}
	}
	if env != "" {
		e.charged[env] = true
		e.released = false
	}
	return gone, nil
}

// group is what env's share of the store is counted for: its namespace,
// so several environments of one namespace share one share; an
// environment whose namespace is not known is a group of its own.
func (st *storeState) group(env types.UID) string {
	if ns := st.namespaces[env]; ns != "" {
		return "ns/" + ns
	}
	return "env/" + string(env)
}

// setNamespace records env's namespace, when told.
func (st *storeState) setNamespace(env types.UID, namespace string) {
	if namespace != "" && env != "" {
		st.namespaces[env] = namespace
	}
}

// chargedTo says whether an environment of group is charged for e.
func (st *storeState) chargedTo(e *entryState, group string) bool {
	for uid := range e.charged {
		if st.group(uid) == group {
			return true
		}
	}
	return false
}

// refuse is a refused admission; a fresh entry is not recorded.
func (st *storeState) refuse(s subject, name string, fresh bool, msg string) error {
	if fresh {
		st.entries[name].size = -1
	}
	return s.permanent("%s", msg)
}

// lru lists the evictable entries that match, least recently used first,
// those no environment is charged for before the others.
func (st *storeState) lru(match func(string, *entryState) bool) []string {
	var names []string
	for n, e := range st.entries {
		if e.size >= 0 && match(n, e) && !st.inUse(n, e) {
			names = append(names, n)
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		ea, eb := st.entries[a], st.entries[b]
		if c := boolCompare(len(ea.charged) > 0, len(eb.charged) > 0); c != 0 {
			return c
		}
		if c := ea.used.Compare(eb.used); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return names
}

func boolCompare(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// checkAccess asks the origin whether env's own credentials grant it the
// content of ref, unless it said yes less than AccessTTL ago for the same
// credentials.
func (f *Fetcher) checkAccess(ctx context.Context, env types.UID, s subject, ref Ref, creds *Credentials) error {
	if ref.Kind == KindArtifact {
		// The Ref exists only because env's impersonated reader could
		// read the Flux object: that was the check.
		return nil
	}
	if last, ok := f.state().checks.Get(memo.Key(env, ref.Source)); ok && last.key == accessKey(ref, creds) && time.Since(last.at) < f.accessTTL() {
		return nil
	}
	var err error
	switch ref.Kind {
	case KindGit:
		err = checkGitAccess(ctx, s, ref, creds)
	case KindOCI:
		err = f.checkOCIAccess(ctx, s, ref, creds)
	}
	if err != nil {
		return fmt.Errorf("access check with this environment's credentials: %w", err)
	}
	f.granted(env, ref, creds)
	return nil
}

// granted notes that the origin granted env the content of ref with
// creds: an access check that passed, or a fill made with them (it read
// the same manifest or commit the check would have asked about).
func (f *Fetcher) granted(env types.UID, ref Ref, creds *Credentials) {
	f.state().checks.Put(memo.Key(env, ref.Source), accessCheck{key: accessKey(ref, creds), at: time.Now()})
}

// accessKey is what a remembered access check was of: the entry, and the
// version of the credentials that passed it.
func accessKey(ref Ref, creds *Credentials) string {
	version := ""
	if creds != nil {
		version = creds.Version
	}
	return ref.storeKey() + "\x00" + version
}

func (f *Fetcher) accessTTL() time.Duration {
	if f.AccessTTL > 0 {
		return f.AccessTTL
	}
	return DefaultAccessTTL
}

// stagingDir is a fresh private directory for work whose result must not
// be shared (expanding a short SHA with one environment's credentials).
func (f *Fetcher) stagingDir(prefix string) (string, error) {
	if f.Root == "" {
		return os.MkdirTemp("", "devloop-"+prefix)
	}
	tmpRoot := filepath.Join(f.Root, tmpDir)
	if err := os.MkdirAll(tmpRoot, 0o755); err != nil {
		return "", err
	}
	return os.MkdirTemp(tmpRoot, prefix)
}
