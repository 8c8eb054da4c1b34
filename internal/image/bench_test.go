package image

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/internal/testfiles"
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
	oneFile Spec // the binary only
	twoFile Spec // the binary and a small config directory
}

// BenchmarkImageBuild assembles and pushes an image with a 20 MiB binary
// layer onto a small base against the real distribution registry, and
// times crane (the go-containerregistry CLI) making the same image as a
// yardstick. Each case runs devloop and crane in turns, one of each per
// iteration, alternating which goes first, so load that comes and goes on
// a shared machine lands on both sides; it reports each side's median
// ms/op and the median of the per-iteration ratios with their spread
// (the 2nd smallest and 2nd largest of them, min and max below 5
// iterations). Run with:
//
//	go test -bench 'ImageBuild/' -benchtime 10x -count 3 -run '^$' ./internal/image/
func BenchmarkImageBuild(b *testing.B) {
	f := newBenchFixture(b)
	ctx := context.Background()

	b.Run("cold", func(b *testing.B) {
		// A new Builder each time: nothing known in the process, a fresh
		// repository; crane likewise pushes to a fresh repository.
		run := benchRun.Add(1)
		uploaded := 0
		f.interleave(b, nil, func(i int) {
			img := f.oneFile
			img.Name = fmt.Sprintf("cold-%d-%d", run, i)
			res, err := f.builder(b).Build(ctx, img, f.dir, staticTags("latest"))
			if err != nil {
				b.Fatal(err)
			}
			uploaded += res.Uploaded
		}, func(i int) {
			f.craneAppend(b, fmt.Sprintf("crane-cold-%d-%d", run, i), f.appTar)
		})
		b.ReportMetric(float64(uploaded)/float64(b.N), "blobs/op")
	})

	b.Run("devloop-cold-uncompressed", func(b *testing.B) {
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

	b.Run("warm-unchanged", func(b *testing.B) {
		bl, img, repo := f.builtOnce(b, f.oneFile, "warm")
		if f.crane != "" {
			f.craneAppend(b, repo, f.appTar)
		}
		f.interleave(b, nil, func(int) {
			res, err := bl.Build(ctx, img, f.dir, staticTags("latest"))
			if err != nil {
				b.Fatal(err)
			}
			if res.Pushed {
				b.Fatal("an unchanged image was pushed")
			}
		}, func(int) {
			f.craneAppend(b, repo, f.appTar)
		})
		b.ReportMetric(0, "blobs/op")
	})

	b.Run("one-layer-changed", func(b *testing.B) {
		bl, img, repo := f.builtOnce(b, f.twoFile, "changed")
		confTar := filepath.Join(b.TempDir(), "conf.tar")
		if f.crane != "" {
			f.craneAppend(b, repo, f.appTar, f.writeConfTar(b, confTar, "generation: 0\n"))
		}
		uploaded := 0
		f.interleave(b, func(i int) {
			generation := fmt.Sprintf("generation: %s-%d\n", img.Name, i) // new content each time
			testfiles.WriteFile(b, f.dir, "conf/settings.yaml", generation)
			f.writeConfTar(b, confTar, generation)
		}, func(int) {
			res, err := bl.Build(ctx, img, f.dir, staticTags("latest"))
			if err != nil {
				b.Fatal(err)
			}
			uploaded += res.Uploaded
		}, func(int) {
			f.craneAppend(b, repo, f.appTar, confTar)
		})
		b.ReportMetric(float64(uploaded)/float64(b.N), "blobs/op")
	})
}

// interleave runs iteration i of devloop and of crane b.N times, in turns,
// devloop first on even iterations and crane first on odd ones, after
// prepare (untimed, when not nil). It reports devloop-ms/op and crane-ms/op
// (medians) and devloop/crane: the median of the iterations' ratios, with
// devloop/crane-lo and -hi around it. Without crane, devloop alone runs.
func (f *benchFixture) interleave(b *testing.B, prepare, devloop, crane func(i int)) {
	b.Helper()
	var ours, theirs []time.Duration
	timed := func(run func(int), i int, into *[]time.Duration) {
		start := time.Now()
		run(i)
		*into = append(*into, time.Since(start))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if prepare != nil {
			b.StopTimer()
			prepare(i)
			b.StartTimer()
		}
		switch {
		case f.crane == "":
			timed(devloop, i, &ours)
		case i%2 == 0:
			timed(devloop, i, &ours)
			timed(crane, i, &theirs)
		default:
			timed(crane, i, &theirs)
			timed(devloop, i, &ours)
		}
	}
	b.StopTimer()
	b.ReportMetric(ms(median(ours)), "devloop-ms/op")
	if len(theirs) == 0 {
		return
	}
	b.ReportMetric(ms(median(theirs)), "crane-ms/op")
	ratios := make([]float64, len(ours))
	for i := range ours {
		ratios[i] = float64(ours[i]) / float64(theirs[i])
	}
	lo, mid, hi := spread(ratios)
	b.ReportMetric(mid, "devloop/crane")
	b.ReportMetric(lo, "devloop/crane-lo")
	b.ReportMetric(hi, "devloop/crane-hi")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// spread is the median of xs and, around it, the second smallest and
// second largest (one outlier each side is not the spread), or the
// smallest and largest for fewer than 5 values.
func spread(xs []float64) (lo, mid, hi float64) {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		mid = s[n/2]
	} else {
		mid = (s[n/2-1] + s[n/2]) / 2
	}
	if n < 5 {
		return s[0], mid, s[n-1]
	}
	return s[1], mid, s[n-2]
}

func newBenchFixture(b *testing.B) *benchFixture {
	b.Helper()
	f := &benchFixture{host: testregistry.Start(b)}
	f.base = pushBenchBase(b, f.host)
	f.dir = b.TempDir()
	testfiles.WriteFile(b, f.dir, "bin/app", string(randomBytes(42, benchBinarySize)))
	testfiles.WriteFile(b, f.dir, "conf/settings.yaml", "generation: 0\n")
	app := v1alpha1.LayerMapping{From: "bin/app", To: "/app", Mode: "0755"}
	conf := v1alpha1.LayerMapping{From: "conf", To: "/etc/app"}
	f.oneFile = Spec{Base: f.base, Layers: []v1alpha1.LayerMapping{app}, Entrypoint: []string{"/app"}}
	f.twoFile = Spec{Base: f.base, Layers: []v1alpha1.LayerMapping{app, conf}, Entrypoint: []string{"/app"}}

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

// builtOnce is where the warm benchmarks start: a Builder that has built
// img once, named prefix and a run number of its own, and the repository,
// of the same name, crane pushes to.
func (f *benchFixture) builtOnce(b *testing.B, img Spec, prefix string) (*Builder, Spec, string) {
	bl := f.builder(b)
	run := benchRun.Add(1)
	img.Name = fmt.Sprintf("%s-%d", prefix, run)
	if _, err := bl.Build(context.Background(), img, f.dir, staticTags("latest")); err != nil {
		b.Fatal(err)
	}
	return bl, img, fmt.Sprintf("crane-%s-%d", prefix, run)
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
