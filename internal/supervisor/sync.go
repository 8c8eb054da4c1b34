package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// SyncResult is what `sync` prints, one JSON line.
type SyncResult struct {
	Digest string `json:"digest"`
	// RestartedMs is how long the supervisor's after-action took (0 when
	// nothing changed).
	RestartedMs int64 `json:"restartedMs"`
	// Files counts the paths written or deleted.
	Files int `json:"files"`
	// Unchanged is true when the digest was already current: nothing was
	// written or restarted.
	Unchanged bool `json:"unchanged,omitempty"`
	// Started is true when this sync opened the supervisor's start gate.
	Started bool `json:"started,omitempty"`
}

// Sync delivers the files of image digest to the live root: the tar of
// changed files (paths as in the image, whiteouts for deletions) is
// written under root, the supervisor is told to do its after-action, and
// the digest is recorded once it did. A digest already recorded writes and
// restarts nothing (the tar is drained unread), but still opens the
// supervisor's start gate. Concurrent syncs are serialized.
//
// Each tar is the difference between the new digest and the image the pod
// runs (not the previous sync), so a path an earlier sync wrote that this
// one does not carry is back to the image's: its link to orig (the
// image's original) again, or gone when the image has none.
func Sync(ctx context.Context, root, orig, digest string, tarStream io.Reader) (SyncResult, error) {
	return syncTar(ctx, root, orig, digest, tarStream, false)
}

// syncTar is Sync; with deltas, the tar's files may be deltas against
// the files the live root holds (a delta frame, DeltaTar).
func syncTar(ctx context.Context, root, orig, digest string, tarStream io.Reader, deltas bool) (SyncResult, error) {
	res := SyncResult{Digest: digest}
	if digest == "" || strings.ContainsAny(digest, "\n\r") {
		return res, errors.New("--digest: want the image digest the files come from")
	}
	unlock, err := lock(root)
	if err != nil {
		return res, err
	}
	defer unlock()

	digestFile := filepath.Join(root, DigestName)
	current, err := os.ReadFile(digestFile)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return res, err
	}
	var changed []string
	if strings.TrimSpace(string(current)) == digest {
		res.Unchanged = true
		// The caller's stdin pipe closes when we exit anyway; draining it
		// just keeps a writer from seeing a broken pipe.
		_, _ = io.Copy(io.Discard, tarStream)
	} else {
		r, err := os.OpenRoot(root)
		if err != nil {
			return res, err
		}
		changed, err = applyTar(r, tarStream, deltas)
		r.Close()
		res.Files = len(changed)
		if err != nil {
			return res, err
		}
		reverted, err := revertOthers(root, orig, changed)
		if err != nil {
			return res, err
		}
		res.Files += reverted
	}
	rep, err := tell(ctx, filepath.Join(root, SocketName), notice{Digest: digest, Changed: res.Files > 0})
	res.RestartedMs, res.Started = rep.RestartedMs, rep.Started
	if err != nil {
		return res, err
	}
	if res.Unchanged {
		return res, nil
	}
	return res, writeAtomically(digestFile, []byte(digest+"\n"))
}

// lock takes the live root's sync lock, waiting for a running sync.
func lock(root string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(root, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("live root %s: %w", root, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

// writeAtomically replaces path with data through a renamed temp file.
func writeAtomically(path string, data []byte) error {
	tmp := fmt.Sprintf("%s.%d.%d", path, os.Getpid(), time.Now().UnixNano())
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// revertOthers brings back to the image's state every path the previous
// sync wrote that this one (changed) did not, records changed as what
// the live root now holds besides the image's files, and returns how many
// paths it put back.
func revertOthers(root, orig string, changed []string) (int, error) {
	manifest := filepath.Join(root, manifestName)
	prev, err := os.ReadFile(manifest)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	n := 0
	now := map[string]bool{}
	for _, p := range changed {
		now[p] = true
	}
	for _, p := range strings.Split(string(prev), "\n") {
		if p == "" || now[p] {
			continue
		}
		if err := revert(root, orig, p); err != nil {
			return n, fmt.Errorf("putting back the image's %s: %w", p, err)
		}
		n++
	}
	return n, writeAtomically(manifest, []byte(strings.Join(changed, "\n")+"\n"))
}

// revert makes image path p in root what the image has: a link to its
// original under orig (a directory of links for a directory), or nothing.
func revert(root, orig, p string) error {
	rel, err := cleanImagePath(p)
	if err != nil {
		return err
	}
	live, original := filepath.Join(root, rel), filepath.Join(orig, rel)
	if err := os.RemoveAll(live); err != nil {
		return err
	}
	st, err := os.Stat(original)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case st.IsDir():
		if err := os.MkdirAll(live, 0o755); err != nil {
			return err
		}
		_, err = seed(live, original)
		return err
	}
	if err := os.MkdirAll(filepath.Dir(live), 0o755); err != nil {
		return err
	}
	return os.Symlink(original, live)
}
