package build

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/internal/testregistry"
)

// Sizes of the benchmark image: a 20 MiB binary on a base of two 2 MiB
// layers; random bytes (incompressible, like a stripped Go binary is
// nearly) from fixed seeds.
const (
	benchBinarySize    = 20 << 20
	benchBaseLayerSize = 2 << 20
)

// benchRun makes repository names unique across the repeated runs of a
// benchmark function (the testing package calls it with growing b.N).
var benchRun atomic.Int64

// benchFixture is what every case shares: a real registry with the base,
// the source tree, and the same layers as tar files for crane.
type benchFixture struct {
	host, base string
	dir        string
	// appTar and confTar are the layers of the image as crane appends them.
	appTar  string
	crane   string
	oneFile Image // the binary only
	twoFile Image // the binary and a small config directory
}

// BenchmarkImageBuild assembles and pushes an image with a 20 MiB binary
// layer onto a small base against the real distribution registry, and
// times crane (the go-containerregistry CLI) making the same image as a
// yardstick. Run with: go test -bench . -run '^$' ./internal/build/
func BenchmarkImageBuild(b *testing.B) {
	f := newBenchFixture(b)
	ctx := context.Background()

	b.Run("devloop/cold", func(b *testing.B) {
		run := benchRun.Add(1)
		uploaded := 0
		for i := 0; i < b.N; i++ {
			// A new Builder: nothing known in the process, a fresh repository.
			bl := f.builder(b)
			img := f.oneFile
			img.Name = fmt.Sprintf("cold-%d-%d", run, i)
			res, err := bl.Build(ctx, img, f.dir, staticTags("latest"))
			if err != nil {
				b.Fatal(err)
			}
			uploaded += res.Uploaded
		}
		b.ReportMetric(float64(uploaded)/float64(b.N), "blobs/op")
	})

	b.Run("devloop/cold-uncompressed", func(b *testing.B) {
		// What a local registry gets by default: the layer's tar as its blob.
		run := benchRun.Add(1)
		for i := 0; i < b.N; i++ {
			bl, err := NewBuilder(Registry{Prefix: f.host + "/bench", Insecure: true, Compression: source.CompressionNone})
			if err != nil {
				b.Fatal(err)
			}
			img := f.oneFile
			img.Name = fmt.Sprintf("cold-plain-%d-%d", run, i)
			if _, err := bl.Build(ctx, img, f.dir, staticTags("latest")); err != nil {
				b.Fatal(err)
			}
		}
	})

	b.Run("devloop/warm-unchanged", func(b *testing.B) {
		bl := f.builder(b)
		img := f.oneFile
		img.Name = fmt.Sprintf("warm-%d", benchRun.Add(1))
		if _, err := bl.Build(ctx, img, f.dir, staticTags("latest")); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			res, err := bl.Build(ctx, img, f.dir, staticTags("latest"))
			if err != nil {
				b.Fatal(err)
			}
			if res.Pushed {
				b.Fatal("an unchanged image was pushed")
			}
		}
		b.ReportMetric(0, "blobs/op")
	})

	b.Run("devloop/one-layer-changed", func(b *testing.B) {
		bl := f.builder(b)
		img := f.twoFile
		run := benchRun.Add(1)
		img.Name = fmt.Sprintf("changed-%d", run)
		if _, err := bl.Build(ctx, img, f.dir, staticTags("latest")); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		uploaded := 0
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			writeFile(b, f.dir, "conf/settings.yaml", fmt.Sprintf("generation: %d-%d\n", run, i))
			b.StartTimer()
			res, err := bl.Build(ctx, img, f.dir, staticTags("latest"))
			if err != nil {
				b.Fatal(err)
			}
			uploaded += res.Uploaded
		}
		b.ReportMetric(float64(uploaded)/float64(b.N), "blobs/op")
	})

	if f.crane == "" {
		return
	}
	b.Run("crane/cold", func(b *testing.B) {
		run := benchRun.Add(1)
		for i := 0; i < b.N; i++ {
			f.craneAppend(b, fmt.Sprintf("crane-cold-%d-%d", run, i), f.appTar)
		}
	})
	b.Run("crane/warm-unchanged", func(b *testing.B) {
		repo := fmt.Sprintf("crane-warm-%d", benchRun.Add(1))
		f.craneAppend(b, repo, f.appTar)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			f.craneAppend(b, repo, f.appTar)
		}
	})
	b.Run("crane/one-layer-changed", func(b *testing.B) {
		run := benchRun.Add(1)
		repo := fmt.Sprintf("crane-changed-%d", run)
		confTar := filepath.Join(b.TempDir(), "conf.tar")
		f.craneAppend(b, repo, f.appTar, f.writeConfTar(b, confTar, "generation: 0\n"))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			f.writeConfTar(b, confTar, fmt.Sprintf("generation: %d-%d\n", run, i))
			b.StartTimer()
			f.craneAppend(b, repo, f.appTar, confTar)
		}
	})
}

func newBenchFixture(b *testing.B) *benchFixture {
	b.Helper()
	f := &benchFixture{host: testregistry.Start(b)}
	f.base = pushBenchBase(b, f.host)
	f.dir = b.TempDir()
	writeFile(b, f.dir, "bin/app", string(randomBytes(42, benchBinarySize)))
	writeFile(b, f.dir, "conf/settings.yaml", "generation: 0\n")
	app := v1alpha1.LayerMapping{From: "bin/app", To: "/app", Mode: "0755"}
	conf := v1alpha1.LayerMapping{From: "conf", To: "/etc/app"}
	f.oneFile = Image{Base: f.base, Layers: []v1alpha1.LayerMapping{app}, Entrypoint: []string{"/app"}}
	f.twoFile = Image{Base: f.base, Layers: []v1alpha1.LayerMapping{app, conf}, Entrypoint: []string{"/app"}}

	f.appTar = filepath.Join(b.TempDir(), "app.tar")
	f.writeLayerFile(b, f.appTar, f.dir, app)

	// crane is a tool dependency of the module: build it once per run.
	f.crane = filepath.Join(b.TempDir(), "crane")
	out, err := exec.Command("go", "build", "-o", f.crane, "github.com/google/go-containerregistry/cmd/crane").CombinedOutput()
	if err != nil {
		b.Logf("crane yardstick skipped: go build crane: %v\n%s", err, out)
		f.crane = ""
	}
	return f
}

func (f *benchFixture) builder(b *testing.B) *Builder {
	b.Helper()
	// gzip, as crane does, though the registry is local: the comparison
	// is of the same work (devloop/cold-uncompressed is the local default).
	bl, err := NewBuilder(Registry{Prefix: f.host + "/bench", Insecure: true, Compression: source.CompressionGzip})
	if err != nil {
		b.Fatal(err)
	}
	return bl
}

// writeLayerFile writes the tar of mapping m exactly as a devloop layer.
func (f *benchFixture) writeLayerFile(b *testing.B, path, dir string, m v1alpha1.LayerMapping) {
	b.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	plan, err := planMapping(root, "bench", m, false)
	if err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	if err := writeLayerTar(&buf, dir, plan.entries); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
}

// writeConfTar writes the small config layer for crane and returns path.
func (f *benchFixture) writeConfTar(b *testing.B, path, content string) string {
	b.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range []*tar.Header{
		{Typeflag: tar.TypeDir, Name: "etc/", Mode: 0o755},
		{Typeflag: tar.TypeDir, Name: "etc/app/", Mode: 0o755},
		{Typeflag: tar.TypeReg, Name: "etc/app/settings.yaml", Mode: 0o644, Size: int64(len(content))},
	} {
		h.ModTime = epoch
		if err := tw.WriteHeader(h); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := io.WriteString(tw, content); err != nil {
		b.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}

// craneAppend runs `crane append` of layers onto the base to host/bench/repo.
func (f *benchFixture) craneAppend(b *testing.B, repo string, layers ...string) {
	b.Helper()
	args := []string{"append", "--insecure", "-b", f.base, "-t", f.host + "/bench/" + repo + ":latest"}
	for _, l := range layers {
		args = append(args, "-f", l)
	}
	if out, err := exec.Command(f.crane, args...).CombinedOutput(); err != nil {
		b.Fatalf("crane %v: %v\n%s", args, err, out)
	}
}

// pushBenchBase pushes a linux/amd64 base of two random layers.
func pushBenchBase(b *testing.B, host string) string {
	b.Helper()
	img := v1.Image(empty.Image)
	for i := int64(0); i < 2; i++ {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		content := randomBytes(100+i, benchBaseLayerSize)
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: fmt.Sprintf("usr/lib/base-%d.so", i), Mode: 0o644, Size: int64(len(content)), ModTime: epoch}
		if err := tw.WriteHeader(hdr); err != nil {
			b.Fatal(err)
		}
		tw.Write(content)
		tw.Close()
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
		if err != nil {
			b.Fatal(err)
		}
		if img, err = mutate.AppendLayers(img, layer); err != nil {
			b.Fatal(err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		b.Fatal(err)
	}
	cfg := cf.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		b.Fatal(err)
	}
	ref, err := name.ParseReference(host+"/bench/base:latest", name.Insecure)
	if err != nil {
		b.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		b.Fatal(err)
	}
	return ref.String()
}
