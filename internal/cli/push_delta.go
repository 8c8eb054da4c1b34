package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/devloop-dev/devloop/internal/source"
)

// deltaBases are the bases of `push --delta`: per repository and mapping
// (a binary an image copies), the layer this machine last pushed whole
// there, kept in the user's cache directory. The next push of that
// mapping is sent as a delta against it (source.DeltaBase), a few KiB for
// a rebuilt binary of tens of MiB. A base is replaced only by a layer
// pushed whole (when the delta would be more than half of it), so every
// base is a blob the registry was given.
type deltaBases struct {
	dir string

	mu sync.Mutex
	// read are the bases read so far, by file, with the file's size and
	// modification time: push --watch pushes many changes against one
	// base, which was read and hashed again on every push (28.5 MiB for
	// an operator's binary).
	read map[string]readBase
}

type readBase struct {
	size int64
	mod  time.Time
	base *source.DeltaBase
}

func pushDeltaBases() *deltaBases {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return &deltaBases{dir: filepath.Join(dir, "devloop", "delta")}
}

func (d *deltaBases) file(repo, from, to string) string {
	sum := sha256.Sum256([]byte(repo + "\x00" + from + "\x00" + to))
	return filepath.Join(d.dir, hex.EncodeToString(sum[:]))
}

// lookup is the bases of repository repo, for source.PackSource.
func (d *deltaBases) lookup(repo string) func(from, to string) *source.DeltaBase {
	return func(from, to string) *source.DeltaBase {
		file := d.file(repo, from, to)
		info, err := os.Stat(file)
		if err != nil {
			return nil
		}
		d.mu.Lock()
		r, ok := d.read[file]
		d.mu.Unlock()
		if ok && r.size == info.Size() && r.mod.Equal(info.ModTime()) {
			return r.base
		}
		base := readDeltaBase(file)
		if base != nil {
			d.mu.Lock()
			if d.read == nil {
				d.read = map[string]readBase{}
			}
			d.read[file] = readBase{size: info.Size(), mod: info.ModTime(), base: base}
			d.mu.Unlock()
		}
		return base
	}
}

// readDeltaBase reads a base file: its digest, a line, then the tar; nil
// when it is not one, or the tar does not hash to the digest.
func readDeltaBase(file string) *source.DeltaBase {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	line, tar, ok := bytes.Cut(b, []byte("\n"))
	if !ok {
		return nil
	}
	digest, err := v1.NewHash(string(line))
	if err != nil {
		return nil
	}
	// A base damaged on disk would only make a delta the operator
	// refuses: checked here instead.
	if got, _, err := v1.SHA256(bytes.NewReader(tar)); err != nil || got != digest {
		return nil
	}
	return &source.DeltaBase{Digest: digest, Tar: tar}
}

// keepWhole makes each mapped layer img pushed whole to repo the base of
// its mapping's next push.
func (d *deltaBases) keepWhole(repo string, img v1.Image) error {
	m, err := img.Manifest()
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for i, desc := range m.Layers {
		from, to := desc.Annotations[source.AnnotationLayerFrom], desc.Annotations[source.AnnotationLayerTo]
		if from == "" || desc.MediaType != types.OCIUncompressedLayer || i >= len(layers) {
			continue
		}
		tar, err := source.LayerBlob(layers[i])
		if err != nil {
			return err
		}
		if err := writeFileAtomic(d.file(repo, from, to), append([]byte(desc.Digest.String()+"\n"), tar...)); err != nil {
			return err
		}
	}
	return nil
}

func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".base-")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
	}
	return err
}

// repositoryOf is ref (repository:tag) without its tag.
func repositoryOf(ref string) string {
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[:i]
	}
	return ref
}

// describeDeltas says which mapped layers of img went as deltas: "bin/server
// as a delta, 12.0 KiB for 28.5 MiB"; "" when none did.
func describeDeltas(img v1.Image) string {
	m, err := img.Manifest()
	if err != nil {
		return ""
	}
	var says []string
	for _, desc := range m.Layers {
		if desc.MediaType != source.MediaTypeDelta {
			continue
		}
		whole, _ := strconv.ParseInt(desc.Annotations[source.AnnotationDeltaSize], 10, 64)
		says = append(says, fmt.Sprintf("%s as a delta, %s for %s", desc.Annotations[source.AnnotationLayerFrom], humanBytes(desc.Size), humanBytes(whole)))
	}
	return strings.Join(says, "; ")
}
