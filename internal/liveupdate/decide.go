// Live update, the operator side: puts a new build's changed files into the running
// pods of a component instead of rolling it out (images[].liveUpdate).
//
// The operator side, in decide*, deliver* and converge* files: whether a
// new digest may be live updated (decide.go: only files under
// liveUpdate.paths differ from the digest the pod templates run), the tar
// of those files, and the sync of every running pod that runs the
// template's digest, through the supervisor the build put in the image
// (/.devloop/supervisor sync, exec'd as the environment's
// ServiceAccount). A pod started later is synced when the operator finds
// it without the latest digest in its devloop.dev/live-digest annotation.

package liveupdate

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Decision is whether a new digest reaches the pods in place.
type Decision struct {
	// Live is true when only files under liveUpdate.paths differ.
	Live bool
	// Reason says why not, naming the path or config field, when !Live.
	Reason string
	// Files are the differing files under liveUpdate.paths, by image path.
	Files []File
}

// File is one changed file of a live update.
type File struct {
	// Path in the image, absolute.
	Path string
	// Deleted files are sent as a whiteout entry.
	Deleted bool
	// layer of the new image holding the file, and its name there
	// (absolute), which differs from Path for a copy under origDir.
	layer int
	entry string
	// kept is the file as the pass that compared it read it, when that
	// pass kept it (within the live update's size): WriteTar writes it
	// without reading the layer again.
	kept *keptFile
}

// keptFile is a changed file's tar header and content.
type keptFile struct {
	header tar.Header
	body   []byte
}

// lister lists a layer's entries by absolute path. With keep, it also
// returns, read in the same pass, the files keep accepts once it has
// their entry (content up to budget bytes in all; a regular file past it
// is not kept, and WriteTar reads it from the layer). keep is first asked
// with a nil entry whether it may want the path at all, so no other
// file's content is held in memory.
type lister func(l v1.Layer, keep func(path string, e *entry) bool, budget int64) (map[string]entry, map[string]*keptFile, error)

// origCopies is where the build keeps the image's own files of live
// paths (the in-container side's OrigDir), each live path being a link
// into the pod's live root.
const origCopies = "/.devloop/orig/"

// supervisorDir is where the build puts the supervisor and what it
// needs; a change there (a new operator binary) needs a rollout.
const supervisorDir = "/.devloop"

// Decide compares the image the pod templates run (old) with a new build
// of it (next): only files under paths differing makes a live update;
// any other file, the config (entrypoint, env, user, ...) or the layer
// count makes a rollout, named in Reason.
func Decide(old, next v1.Image, paths []string) (*Decision, error) {
	return decide(old, next, paths, layerEntriesKeeping, DefaultMaxBytes)
}

// decide is Decide listing layers with list, keeping up to budget bytes
// of the changed files' content for the tar.
func decide(old, next v1.Image, paths []string, list lister, budget int64) (*Decision, error) {
	if reason, err := configChange(old, next); err != nil || reason != "" {
		return &Decision{Reason: reason}, err
	}
	oldLayers, err := old.Layers()
	if err != nil {
		return nil, err
	}
	newLayers, err := next.Layers()
	if err != nil {
		return nil, err
	}
	if len(oldLayers) != len(newLayers) {
		return &Decision{Reason: fmt.Sprintf("the image has %d layers where the pods' has %d (images[].layers or the base changed)", len(newLayers), len(oldLayers))}, nil
	}
	d := &Decision{Live: true}
	for i := range newLayers {
		same, err := sameLayer(oldLayers[i], newLayers[i])
		if err != nil {
			return nil, err
		}
		if same {
			continue
		}
		changed, err := layerChanges(oldLayers[i], newLayers[i], paths, list, budget)
		if err != nil {
			return nil, fmt.Errorf("comparing layer %d: %w", i, err)
		}
		for _, c := range changed {
			p := imagePath(c.Path)
			if p == "" || !underAny(p, paths) {
				return &Decision{Reason: fmt.Sprintf("%s changed, outside liveUpdate.paths", c.Path)}, nil
			}
			c.entry, c.Path, c.layer = c.Path, p, i
			d.Files = append(d.Files, c)
		}
	}
	sort.Slice(d.Files, func(a, b int) bool { return d.Files[a].Path < d.Files[b].Path })
	return d, nil
}

// imagePath is the path a changed layer entry updates in the pod: the
// path itself, or the one a copy under OrigDir mirrors (the build keeps
// a live path's own file there, the path being a link into LiveRoot); "" for the
// supervisor's own files.
func imagePath(p string) string {
	if rest, ok := strings.CutPrefix(p, origCopies); ok {
		return "/" + rest
	}
	if p == supervisorDir || strings.HasPrefix(p, supervisorDir+"/") {
		return ""
	}
	return p
}

// underAny reports whether p is one of paths or below one.
func underAny(p string, paths []string) bool {
	for _, lp := range paths {
		lp = strings.TrimSuffix(lp, "/")
		if p == lp || strings.HasPrefix(p, lp+"/") {
			return true
		}
	}
	return false
}

// configChange names the first image config field that differs, or "".
// Only what the container runs with counts: history and creation times
// do not.
func configChange(old, next v1.Image) (string, error) {
	oc, err := old.ConfigFile()
	if err != nil {
		return "", err
	}
	nc, err := next.ConfigFile()
	if err != nil {
		return "", err
	}
	if oc.OS != nc.OS || oc.Architecture != nc.Architecture || oc.Variant != nc.Variant {
		return fmt.Sprintf("the image's platform changed (%s/%s to %s/%s)", oc.OS, oc.Architecture, nc.OS, nc.Architecture), nil
	}
	a, err := fields(oc.Config)
	if err != nil {
		return "", err
	}
	b, err := fields(nc.Config)
	if err != nil {
		return "", err
	}
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if string(a[k]) != string(b[k]) {
			return fmt.Sprintf("the image config's %s changed", k), nil
		}
	}
	return "", nil
}

// fields is a config's JSON fields, each as its JSON.
func fields(c v1.Config) (map[string]json.RawMessage, error) {
	data, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	m := map[string]json.RawMessage{}
	return m, json.Unmarshal(data, &m)
}

func sameLayer(a, b v1.Layer) (bool, error) {
	da, err := a.DiffID()
	if err != nil {
		return false, err
	}
	db, err := b.DiffID()
	if err != nil {
		return false, err
	}
	return da == db, nil
}

// entry is what a layer says about one path.
type entry struct {
	typeflag byte
	mode     int64
	uid, gid int
	link     string
	sum      string
}

// layerChanges lists the paths that differ between two layers at the
// same position: added, changed or removed files, links and whiteouts.
// Directories count only when added, removed or given other owners or
// modes; files inside them are listed for themselves. The changed files
// under paths are kept as the new layer is read (up to budget bytes), so
// the live update's tar does not read it again.
func layerChanges(old, next v1.Layer, paths []string, list lister, budget int64) ([]File, error) {
	a, _, err := list(old, nil, 0)
	if err != nil {
		return nil, err
	}
	keep := func(p string, e *entry) bool {
		if ip := imagePath(p); ip == "" || !underAny(ip, paths) {
			return false
		}
		o, ok := a[p]
		return e == nil || !ok || o != *e
	}
	b, kept, err := list(next, keep, budget)
	if err != nil {
		return nil, err
	}
	var out []File
	for p, e := range b {
		if o, ok := a[p]; !ok || o != e {
			if e.typeflag == tar.TypeDir && ok {
				out = append(out, File{Path: p, kept: kept[p]})
				continue
			}
			if e.typeflag == tar.TypeDir {
				continue // a new directory holds new files, listed themselves
			}
			out = append(out, File{Path: p, kept: kept[p]})
		}
	}
	for p, e := range a {
		if _, ok := b[p]; !ok && e.typeflag != tar.TypeDir {
			out = append(out, File{Path: p, Deleted: true})
		}
	}
	return out, nil
}

// ErrLayerNotItsDiffID is a layer whose uncompressed bytes are not the
// diff ID its image's config names for it.
var ErrLayerNotItsDiffID = errors.New("a layer's content is not the diff ID its image config names")

// layerEntries reads a layer's tar into entries by absolute path. The
// whole uncompressed stream is hashed and must be the layer's diff ID:
// an image's config may name any ID for any bytes (a base another
// tenant pushed), and a listing is remembered by what it claims
// (Engine.entriesOf). Reading to the end also lets a registry layer
// check its compressed digest, which it does at EOF.
func layerEntries(l v1.Layer) (map[string]entry, error) {
	out, _, err := layerEntriesKeeping(l, nil, 0)
	return out, err
}

// layerEntriesKeeping is layerEntries, keeping what keep accepts (a
// lister).
func layerEntriesKeeping(l v1.Layer, keep func(string, *entry) bool, budget int64) (map[string]entry, map[string]*keptFile, error) {
	claimed, err := l.DiffID()
	if err != nil {
		return nil, nil, err
	}
	rc, err := l.Uncompressed()
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = rc.Close() }()
	whole := sha256.New()
	out, kept, err := readEntries(io.TeeReader(rc, whole), keep, budget)
	if err != nil {
		return nil, nil, err
	}
	if _, err := io.Copy(whole, rc); err != nil {
		return nil, nil, err
	}
	if got := "sha256:" + hex.EncodeToString(whole.Sum(nil)); got != claimed.String() {
		// Nothing kept from it is used either.
		return nil, nil, fmt.Errorf("%w (%s is %s)", ErrLayerNotItsDiffID, claimed, got)
	}
	return out, kept, nil
}

// readEntries reads a tar into entries by absolute path, keeping the
// entries keep accepts (see lister).
func readEntries(r io.Reader, keep func(string, *entry) bool, budget int64) (map[string]entry, map[string]*keptFile, error) {
	out, kept := map[string]entry{}, map[string]*keptFile{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, kept, nil
		}
		if err != nil {
			return nil, nil, err
		}
		p := cleanPath(h.Name)
		e := entry{typeflag: h.Typeflag, mode: h.Mode & 07777, uid: h.Uid, gid: h.Gid, link: h.Linkname}
		var body []byte
		if h.Typeflag == tar.TypeReg {
			sum := sha256.New()
			if keep != nil && h.Size <= budget && keep(p, nil) {
				// Held while hashed: kept only if keep accepts it.
				var buf bytes.Buffer
				buf.Grow(int(h.Size))
				if _, err := io.Copy(io.MultiWriter(sum, &buf), tr); err != nil {
					return nil, nil, err
				}
				body = buf.Bytes()
			} else if _, err := io.Copy(sum, tr); err != nil {
				return nil, nil, err
			}
			e.sum = hex.EncodeToString(sum.Sum(nil))
		}
		out[p] = e
		if keep != nil && (h.Typeflag != tar.TypeReg || body != nil) && keep(p, &e) {
			kept[p] = &keptFile{header: *h, body: body}
			budget -= int64(len(body))
		}
	}
}

// cleanPath is a tar entry's name as an absolute image path.
func cleanPath(name string) string {
	return path.Clean("/" + name)
}
