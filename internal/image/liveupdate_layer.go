package image

import (
	"archive/tar"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/supervisor"
)

// A live-updatable image (images[].liveUpdate, Spec.LivePaths) is built
// with two changes, so that any program reads synced files at their own
// paths, with no shell, tar or writable image file in the container:
//
//   - the entries of its layers under a live path move to
//     /.devloop/orig/<path> (relocateLive): the image's own files, which
//     the supervisor links into the live root when the pod starts;
//   - one more layer on top (LiveUpdateLayer) holds the supervisor at
//     /.devloop/supervisor (cmd/supervisor for the image's platform, from
//     SupervisorDir; else the operator's own static binary) and makes
//     each live path a symlink to /.devloop/live/<path>, the pod's
//     emptyDir where syncs write.

// WithSupervisor sets the static binary every live-updatable image gets
// as its supervisor, whatever its platform (SupervisorFor otherwise).
func WithSupervisor(binary string) Option { return func(o *options) { o.supervisor = binary } }

// SupervisorDir is where the operator image keeps cmd/supervisor, built
// for each platform it supports, as supervisor-<os>-<arch>[-<variant>].
const SupervisorDir = "/supervisors"

// SupervisorName is the file name of the supervisor for platform p in
// SupervisorDir.
func SupervisorName(p v1.Platform) string {
	n := "supervisor-" + p.OS + "-" + p.Architecture
	if p.Variant != "" {
		n += "-" + p.Variant
	}
	return n
}

// SupervisorFor is the supervisor binary for platform p: the small one in
// dir (SupervisorDir in the operator image) when there is one, else the
// running binary (os.Executable: the operator's own, which is the
// supervisor too when started under its name, only bigger and slower to
// start).
func SupervisorFor(dir string, p v1.Platform) (string, error) {
	if dir != "" {
		bin := filepath.Join(dir, SupervisorName(p))
		if _, err := os.Stat(bin); err == nil {
			return bin, nil
		}
	}
	return os.Executable()
}

// LiveUpdateLayer is the supervisor layer of a live-updatable image for
// platform p: the directories of /.devloop, the supervisor binary (0755)
// and a symlink into the live root for each of livePaths (absolute image
// paths). binary must be a static Linux ELF for p, since it runs in
// images without a libc (scratch, distroless). compressed makes a gzip
// layer, else an uncompressed one (a local registry).
func LiveUpdateLayer(image, binary string, p v1.Platform, livePaths []string, compressed bool) (v1.Layer, error) {
	st, err := os.Stat(binary)
	if err != nil {
		return nil, fault.Permanentf("image %s: liveUpdate: the supervisor binary: %v", image, err)
	}
	if err := checkStaticELF(binary, p); err != nil {
		return nil, fault.Permanentf("image %s: liveUpdate: %v", image, err)
	}
	entries := supervisorEntries(st.Size(), livePaths)
	writeTar := func(w io.Writer) error { return writeSupervisorTar(w, binary, st, entries) }
	if compressed {
		// Not kept: the compressed blob is held in memory when small.
		// Hashing the tar again is all a build costs (its compression is
		// known by diff ID and skipped).
		return newSourceLayer(writeTar, &supervisorDigests)
	}
	key := fmt.Sprintf("%s|%d|%d|%s|%v", binary, st.Size(), st.ModTime().UnixNano(), p.String(), livePaths)
	return supervisorLayers.get(key, func() (v1.Layer, error) { return newUncompressedLayer(writeTar) })
}

// supervisorEntries are the layer's tar entries: the supervisor's
// directories and file, then each live path's parents and symlink.
func supervisorEntries(size int64, livePaths []string) []layerEntry {
	root := strings.TrimPrefix(path.Dir(supervisor.Path), "/")
	entries := []layerEntry{
		{name: root + "/", typeflag: tar.TypeDir, mode: dirMode},
		{name: strings.TrimPrefix(supervisor.LiveRoot, "/") + "/", typeflag: tar.TypeDir, mode: 0o777},
		{name: strings.TrimPrefix(supervisor.Path, "/"), typeflag: tar.TypeReg, mode: 0o755, size: size},
	}
	seen := map[string]bool{}
	paths := slices.Clone(livePaths)
	slices.Sort(paths)
	for _, lp := range paths {
		rel := strings.TrimPrefix(path.Clean(lp), "/")
		for _, dir := range parentDirs(rel) {
			if !seen[dir] {
				seen[dir] = true
				entries = append(entries, layerEntry{name: dir + "/", typeflag: tar.TypeDir, mode: dirMode})
			}
		}
		entries = append(entries, layerEntry{name: rel, typeflag: tar.TypeSymlink, mode: 0o777,
			linkname: path.Join(supervisor.LiveRoot, rel)})
	}
	return entries
}

// writeSupervisorTar writes entries, the supervisor's content from binary
// (checked to be the file planned: an operator upgrade replaces it).
func writeSupervisorTar(w io.Writer, binary string, st os.FileInfo, entries []layerEntry) error {
	tw := tar.NewWriter(w)
	for _, e := range entries {
		hdr := &tar.Header{Typeflag: e.typeflag, Name: e.name, Linkname: e.linkname, Mode: e.mode, Size: e.size, ModTime: epoch}
		if e.typeflag != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if e.typeflag != tar.TypeReg {
			continue
		}
		f, err := os.Open(binary)
		if err != nil {
			return err
		}
		n, err := io.Copy(tw, io.LimitReader(f, e.size+1))
		f.Close()
		if err == nil && n != st.Size() {
			err = fmt.Errorf("the supervisor binary %s changed while it was read", binary)
		}
		if err != nil {
			return err
		}
	}
	return tw.Close()
}

// elfMachines are the ELF machines of the architectures Go builds.
var elfMachines = map[string]elf.Machine{
	"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "arm": elf.EM_ARM, "386": elf.EM_386,
	"ppc64le": elf.EM_PPC64, "s390x": elf.EM_S390, "riscv64": elf.EM_RISCV,
}

// checkStaticELF refuses a binary that is not a static Linux executable
// for p.
func checkStaticELF(binary string, p v1.Platform) error {
	f, err := elf.Open(binary)
	if err != nil {
		return fmt.Errorf("the supervisor %s is not an ELF executable: %v", binary, err)
	}
	defer f.Close()
	have := "?"
	for arch, m := range elfMachines {
		if m == f.Machine {
			have = arch
		}
	}
	if p.OS != "linux" || elfMachines[p.Architecture] != f.Machine {
		return fmt.Errorf("no supervisor for %s: the operator image has none in %s and its own binary is built for linux/%s; "+
			"list in images[].platforms only platforms the operator image ships a supervisor for, or drop images[].liveUpdate", p.String(), SupervisorDir, have)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("the supervisor %s is dynamically linked and would not run in scratch or distroless images: build the operator with CGO_ENABLED=0", binary)
		}
	}
	return nil
}

// relocateLive moves a layer plan's entries under livePaths to
// /.devloop/orig (supervisor.OrigDir), adding the directories above them.
func relocateLive(plan *layerPlan, livePaths []string) {
	if len(livePaths) == 0 {
		return
	}
	orig := strings.TrimPrefix(supervisor.OrigDir, "/")
	var out []layerEntry
	have := map[string]bool{}
	for _, e := range plan.entries {
		have[e.name] = true
	}
	for _, e := range plan.entries {
		name := strings.TrimSuffix(e.name, "/")
		if !underLivePath(name, livePaths) {
			out = append(out, e)
			continue
		}
		moved := e
		moved.name = orig + "/" + e.name
		for _, dir := range parentDirs(orig + "/" + name) {
			if !have[dir+"/"] {
				have[dir+"/"] = true
				out = append(out, layerEntry{name: dir + "/", typeflag: tar.TypeDir, mode: dirMode})
			}
		}
		have[moved.name] = true
		out = append(out, moved)
	}
	plan.entries = out
}

// underLivePath reports whether rel (relative to /) is a live path or
// below one.
func underLivePath(rel string, livePaths []string) bool {
	for _, lp := range livePaths {
		lp = strings.TrimPrefix(path.Clean(lp), "/")
		if rel == lp || strings.HasPrefix(rel, lp+"/") {
			return true
		}
	}
	return false
}

// coveredLivePaths are the live paths some layer mapping writes: each
// becomes a symlink into the live root. A live path no mapping writes is
// left alone (it may be the base image's, which only a rollout changes).
func coveredLivePaths(img Spec) []string {
	var out []string
	for _, lp := range img.LivePaths {
		rel := strings.TrimPrefix(path.Clean(lp), "/")
		for _, m := range img.Layers {
			to := strings.TrimPrefix(path.Clean(m.To), "/")
			if to == rel || strings.HasPrefix(to, rel+"/") || strings.HasPrefix(rel, to+"/") || to == "" {
				out = append(out, lp)
				break
			}
		}
	}
	return out
}

// withSupervisor adds the supervisor layer on top of each platform image
// of a live-updatable img.
func (b *Builder) withSupervisor(img Spec, images []platformImage) ([]platformImage, error) {
	if len(img.LivePaths) == 0 {
		return images, nil
	}
	out := make([]platformImage, len(images))
	for i, pi := range images {
		binary := b.supervisor
		if binary == "" {
			var err error
			if binary, err = SupervisorFor(SupervisorDir, pi.platform); err != nil {
				return nil, fault.Permanentf("image %s: liveUpdate: finding the supervisor for %s: %v", img.Name, pi.platform.String(), err)
			}
		}
		layer, err := LiveUpdateLayer(img.Name, binary, pi.platform, coveredLivePaths(img), !b.uncompressed)
		if err != nil {
			return nil, err
		}
		mt, err := pi.image.MediaType()
		if err != nil {
			return nil, err
		}
		lt, err := layer.MediaType()
		if err != nil {
			return nil, err
		}
		image, err := mutate.Append(pi.image, mutate.Addendum{
			Layer:     layer,
			MediaType: layerMediaType(lt, mt == types.DockerManifestSchema2),
			History:   v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "devloop: live update supervisor " + supervisor.Path, Comment: "devloop"},
		})
		if err != nil {
			return nil, err
		}
		out[i] = platformImage{platform: pi.platform, image: image}
	}
	return out, nil
}

// supervisorLayers keeps the uncompressed supervisor layers made by this
// process (their tar is not held, only digests): the binary is tens of
// megabytes, hashed once rather than at every build.
var supervisorLayers = layerMemo{m: map[string]v1.Layer{}}

// supervisorDigests are the compressed digests of supervisor layers.
var supervisorDigests compressedDigests

type layerMemo struct {
	mu sync.Mutex
	m  map[string]v1.Layer
}

func (c *layerMemo) get(key string, make func() (v1.Layer, error)) (v1.Layer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.m[key]; ok {
		return l, nil
	}
	l, err := make()
	if err != nil {
		return nil, err
	}
	if len(c.m) > 16 {
		clear(c.m)
	}
	c.m[key] = l
	return l, nil
}
