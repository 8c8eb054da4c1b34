package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"
)

// The store keeps one entry per content key under Fetcher.Root:
//
//	<root>/<key>/meta.json   what was learned while fetching (the git tree digest)
//	<root>/<key>/content/    the extracted tree, Artifact.Dir
//	<root>/<key>/layers/     blobs of mapped layers (PrebuiltLayer)
//	<root>/.tmp/             entries being written
//
// An entry is assembled under .tmp and renamed into place in one step, so
// an entry that exists is complete: a process killed mid-fetch leaves only
// litter under .tmp, which later fetches sweep.
const (
	metaFile   = "meta.json"
	contentDir = "content"
	layersDir  = "layers"
	tmpDir     = ".tmp"
)

// entryMeta is what Fetch learned that the Ref may not say: for git the
// tree digest exists only once the tree is on disk.
type entryMeta struct {
	Digest string `json:"digest"`
	// Boot is the kernel boot ID of an entry written without flushing it
	// to disk; such an entry is trusted only within that boot.
	Boot string `json:"boot,omitempty"`
	// Layers are the artifact's mapped layers whose blobs were kept.
	Layers []PrebuiltLayer `json:"layers,omitempty"`
	// Bases are the digests of the delta bases kept under layers/
	// (deltaFill.keep), for the next delta against them.
	Bases []string `json:"bases,omitempty"`
}

// validKey guards the store against a Ref that arrived as JSON naming a
// path ("../x"): keys become directory names.
// A git key is the full commit and a hash of the URL (Ref.storeKey); a
// short SHA is never a key.
// An OCI or Flux entry is the digest and a hash of its origin. A bare
// digest is still a valid key of content (validDigest).
var validKey = regexp.MustCompile(`^(git-[0-9a-f]{40}-[0-9a-f]{16}|(oci|artifact)-` + digestPattern + `-[0-9a-f]{16}|` + digestPattern + `)$`)

// validDigest is a content digest as a spec or a registry gives it.
var validDigest = regexp.MustCompile(`^` + digestPattern + `$`)

const digestPattern = `(sha256:[0-9a-f]{64}|sha384:[0-9a-f]{96}|sha512:[0-9a-f]{128})`

// entryName maps a content key to a directory name; colons are kept out of
// paths because tools splitting PATH-like lists trip over them.
func entryName(key string) (string, error) {
	if !validKey.MatchString(key) {
		return "", fmt.Errorf("invalid content key %q", key)
	}
	return strings.ReplaceAll(key, ":", "-"), nil
}

// servedTo is the environment an entry is served to (Serve): check asks the
// origin whether its credentials grant the content, before an entry the
// store holds is served; filled notes that they did, when the entry was
// filled with them. Both are nil for Fetch (a helper pod's own store).
type servedTo struct {
	check  func() error
	filled func()
}

// filler writes the content of a Ref into content, using scratch for
// anything that must not end up in the store (a git object database, a
// downloaded archive).
type filler func(ctx context.Context, content, scratch string) (entryMeta, error)

// stored serves ref from the store, filling the entry first when it is
// missing. Concurrent calls for the same key in this process wait for one
// another; across processes the atomic rename decides and the loser's copy
// is dropped.
//
// env, when set, is the environment served: the entry is charged to it and
// stays in use for it (see the package doc).
func (f *Fetcher) stored(ctx context.Context, s subject, ref Ref, fill filler, env types.UID, to servedTo) (*Artifact, error) {
	if f.Root == "" {
		return nil, errors.New("source: Fetcher.Root is not set")
	}
	name, err := entryName(ref.storeKey())
	if err != nil {
		return nil, s.permanent("%v", err)
	}
	entry := filepath.Join(f.Root, name)
	release := f.hold(name, env)
	defer release()
	hit := func(a *Artifact) (*Artifact, error) {
		a, err := checked(s, ref, a)
		if err != nil {
			return nil, err
		}
		if to.check != nil {
			if err := to.check(); err != nil {
				return nil, err
			}
		}
		if err := f.admit(s, name, -1, env); err != nil {
			return nil, err
		}
		return a, nil
	}

	// A refusal learned from an earlier fill is told only to one the
	// origin grants the content.
	refused := func() error {
		err := f.refused(s, name, env)
		if err != nil && to.check != nil {
			if cerr := to.check(); cerr != nil {
				return cerr
			}
		}
		return err
	}

	if a, ok := f.load(s, entry, ref); ok {
		return hit(a)
	}
	if err := refused(); err != nil {
		return nil, err
	}
	unlock, err := f.store().locks.lockKey(ctx, entry)
	if err != nil {
		return nil, s.wrap(err)
	}
	defer unlock()
	if a, ok := f.load(s, entry, ref); ok {
		return hit(a)
	}
	// A concurrent fetch of the same entry may have been refused.
	if err := refused(); err != nil {
		return nil, err
	}
	// An entry that exists but cannot be read was damaged from outside the
	// store (rename makes partial entries impossible); it is replaced.
	if err := os.RemoveAll(entry); err != nil {
		return nil, fmt.Errorf("%s: clearing damaged store entry: %w", s, err)
	}

	tmpRoot := filepath.Join(f.Root, tmpDir)
	if err := os.MkdirAll(tmpRoot, 0o755); err != nil {
		return nil, fmt.Errorf("%s: creating store: %w", s, err)
	}
	f.sweep(tmpRoot)
	tmp, err := os.MkdirTemp(tmpRoot, name+"-")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s, err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	scratch, err := os.MkdirTemp(tmpRoot, name+"-scratch-")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s, err)
	}
	defer func() { _ = os.RemoveAll(scratch) }()
	content := filepath.Join(tmp, contentDir)
	if err := os.Mkdir(content, 0o755); err != nil {
		return nil, fmt.Errorf("%s: %w", s, err)
	}

	fillCtx, filled := f.watchFill(ctx, s, name, env, tmp, scratch)
	meta, err := fill(fillCtx, content, scratch)
	if full := filled(); full != nil {
		// Stopped for the store's bound: a refusal when it alone is
		// larger than the store, else a wait for room.
		return nil, f.remember(ctx, s, name, env, full, -1)
	}
	if err != nil {
		return nil, f.remember(ctx, s, name, env, err, -1)
	}
	if _, err := checked(s, ref, artifact(ref, meta, entry)); err != nil {
		// Not remembered: the expected digest is the Ref's, not the
		// entry's (a git entry's key is its commit).
		return nil, err
	}
	// Without a flush, a power loss after the rename could leave an entry
	// that looks complete with empty files in it; rename alone only orders
	// what the process sees. Flushing costs 50–100 ms on a busy node, on
	// the path of every change, so the entry instead records the boot it
	// was written in: unflushed data is lost only with the boot, and an
	// entry from an earlier boot is fetched again. A store that outlives
	// the node (Flush) flushes instead: another node's boot must trust it.
	meta.Boot = ""
	if !f.Flush {
		meta.Boot = bootID()
	}
	b, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, metaFile), b, 0o644); err != nil {
		return nil, fmt.Errorf("%s: %w", s, err)
	}
	if meta.Boot == "" {
		syncFS(tmp)
	}
	// Room is made, or the entry refused, before it becomes visible.
	size := entrySize(tmp)
	if err := f.admit(s, name, size, env); err != nil {
		return nil, f.remember(ctx, s, name, env, err, size)
	}
	f.forgetRefusal(name)
	if to.filled != nil {
		to.filled()
	}
	if err := os.Rename(tmp, entry); err != nil {
		if a, ok := f.load(s, entry, ref); ok {
			return checked(s, ref, a) // another process filled it first
		}
		return nil, fmt.Errorf("%s: storing: %w", s, err)
	}
	f.keepBlobs(ref, meta, entry)
	a := artifact(ref, meta, entry)
	a.Downloaded = true
	return a, nil
}

// blobFile is where an entry keeps the blob digest, under the entry.
func blobFile(digest v1.Hash) string {
	return filepath.Join(layersDir, digest.Algorithm+"-"+digest.Hex)
}

// keepBlobs remembers the blobs an entry of ref keeps, newest last: the
// mapped layers (the next push's delta base) and the bases of its deltas.
func (f *Fetcher) keepBlobs(ref Ref, meta entryMeta, entry string) {
	if ref.Kind != KindOCI {
		return
	}
	kept := &f.store().kept
	for _, d := range meta.Bases {
		if h, err := v1.NewHash(d); err == nil {
			kept.remember(ref.origin(), h, filepath.Join(entry, blobFile(h)))
		}
	}
	for _, l := range meta.Layers {
		if h, err := v1.NewHash(l.Digest); err == nil {
			kept.remember(ref.origin(), h, filepath.Join(entry, l.File))
		}
	}
}

// load returns the stored entry for ref, if complete.
func (f *Fetcher) load(s subject, entry string, ref Ref) (*Artifact, bool) {
	b, err := os.ReadFile(filepath.Join(entry, metaFile))
	if err != nil {
		return nil, false
	}
	var meta entryMeta
	if err := json.Unmarshal(b, &meta); err != nil || meta.Digest == "" {
		return nil, false
	}
	if meta.Boot != "" && meta.Boot != bootID() {
		return nil, false // written unflushed before a reboot: not trusted
	}
	if fi, err := os.Stat(filepath.Join(entry, contentDir)); err != nil || !fi.IsDir() {
		return nil, false
	}
	return artifact(ref, meta, entry), true
}

// checked refuses content whose digest differs from the one the Ref
// carries: a helper pod must build exactly what the operator resolved, and
// a git tree digest is only known from an earlier fetch.
func checked(s subject, ref Ref, a *Artifact) (*Artifact, error) {
	if ref.Digest != "" && a.Digest != ref.Digest {
		return nil, s.permanent("digest mismatch: expected %s, fetched content has %s", ref.Digest, a.Digest)
	}
	return a, nil
}

func artifact(ref Ref, meta entryMeta, entry string) *Artifact {
	ref.Digest = meta.Digest
	a := &Artifact{Ref: ref, Dir: filepath.Join(entry, contentDir)}
	for _, l := range meta.Layers {
		l.File = filepath.Join(entry, l.File)
		a.Prebuilt = append(a.Prebuilt, l)
	}
	return a
}

// sweep removes what crashed fetches left under .tmp. A fetch is bounded by
// the timeout, so anything much older than that has no owner any more.
func (f *Fetcher) sweep(tmpRoot string) {
	staleAfter := max(2*f.timeout(), time.Hour)
	entries, err := os.ReadDir(tmpRoot)
	if err != nil {
		return
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < staleAfter {
			continue
		}
		_ = os.RemoveAll(filepath.Join(tmpRoot, e.Name()))
	}
}

// bootID is the kernel's random ID of this boot, "" where there is none
// (entries are then flushed instead).
var bootID = sync.OnceValue(func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
})

// syncFS flushes the file system holding dir. Best effort: a failure only
// weakens crash safety, it does not make the content wrong.
func syncFS(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	defer func() { _ = d.Close() }()
	_ = unix.Syncfs(int(d.Fd()))
}

// keyLocks serialise fetches of one store entry within an operator
// (Store.locks), so two reconciles needing the same commit download it
// once.
type keyLocks struct {
	sync.Mutex
	m map[string]*keyLock
}

type keyLock struct {
	ch    chan struct{}
	users int
}

// lockKey waits for the entry's lock or for ctx, whichever comes first.
func (locks *keyLocks) lockKey(ctx context.Context, key string) (func(), error) {
	locks.Lock()
	l := locks.m[key]
	if l == nil {
		l = &keyLock{ch: make(chan struct{}, 1)}
		locks.m[key] = l
	}
	l.users++
	locks.Unlock()

	release := func() {
		locks.Lock()
		l.users--
		if l.users == 0 {
			delete(locks.m, key)
		}
		locks.Unlock()
	}
	select {
	case l.ch <- struct{}{}:
		return func() { <-l.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, fmt.Errorf("waiting for a concurrent fetch of the same content: %w", ctx.Err())
	}
}
