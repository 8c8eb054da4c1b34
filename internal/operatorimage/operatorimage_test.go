package operatorimage

import (
	"archive/tar"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/internal/testfiles"
	"github.com/devloop-dev/devloop/internal/testregistry"
)

const testCA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

// fakeOptions stands a small file per platform in for the manager: the
// image's layout, not the binary, is under test here.
func fakeOptions(t *testing.T) Options {
	t.Helper()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, []byte(testCA), 0o644); err != nil {
		t.Fatal(err)
	}
	bins, sups := map[string]string{}, map[string]string{}
	for _, p := range DefaultPlatforms {
		bin := filepath.Join(dir, strings.ReplaceAll(p, "/", "-"))
		if err := os.WriteFile(bin, []byte("manager for "+p), 0o700); err != nil {
			t.Fatal(err)
		}
		bins[p] = bin
		sup := bin + "-supervisor"
		if err := os.WriteFile(sup, []byte("supervisor for "+p), 0o700); err != nil {
			t.Fatal(err)
		}
		sups[p] = sup
	}
	return Options{Binaries: bins, Supervisors: sups, CABundle: ca, Revision: "0123abc"}
}

type file struct {
	mode     int64
	uid      int
	content  string
	typeflag byte
}

// files flattens img into path -> file.
func files(t *testing.T, img v1.Image) map[string]file {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	out := map[string]file{}
	for _, e := range testfiles.ReadTar(t, rc) {
		out["/"+strings.TrimSuffix(e.Name, "/")] = file{mode: e.Mode, uid: e.Uid, content: e.Content, typeflag: e.Typeflag}
	}
	return out
}

func TestLayoutIsAMultiPlatformNonRootImage(t *testing.T) {
	ctx := context.Background()
	opts := fakeOptions(t)
	dir := filepath.Join(t.TempDir(), "layout")
	res, err := WriteLayout(ctx, opts, dir, "v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	topManifest, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(topManifest.Manifests) != 1 || topManifest.Manifests[0].Digest.String() != res.Digest ||
		topManifest.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "v0.1.0" {
		t.Fatalf("layout index %+v, want one entry %s named v0.1.0", topManifest.Manifests, res.Digest)
	}
	idx, err := top.ImageIndex(topManifest.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, m := range im.Manifests {
		platforms = append(platforms, m.Platform.String())
		img, err := idx.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Platform().String() != m.Platform.String() {
			t.Errorf("%s: config platform %s", m.Platform, cf.Platform())
		}
		if cf.Config.User != "65532:65532" || !reflect.DeepEqual(cf.Config.Entrypoint, []string{"/manager"}) {
			t.Errorf("%s: user %q entrypoint %q, want 65532:65532 [/manager]", m.Platform, cf.Config.User, cf.Config.Entrypoint)
		}
		if cf.Config.Labels["org.opencontainers.image.revision"] != "0123abc" {
			t.Errorf("%s: labels %v lack the revision", m.Platform, cf.Config.Labels)
		}
		fs := files(t, img)
		want := map[string]file{
			"/manager": {mode: 0o755, content: "manager for " + m.Platform.String(), typeflag: tar.TypeReg},
			// Every platform's image has every platform's supervisor.
			"/supervisors/supervisor-linux-amd64": {mode: 0o755, content: "supervisor for linux/amd64", typeflag: tar.TypeReg},
			"/supervisors/supervisor-linux-arm64": {mode: 0o755, content: "supervisor for linux/arm64", typeflag: tar.TypeReg},
			"/etc/ssl/certs/ca-certificates.crt":  {mode: 0o644, content: testCA, typeflag: tar.TypeReg},
			"/tmp":                                {mode: 0o1777, typeflag: tar.TypeDir},
			"/home/nonroot":                       {mode: 0o700, uid: NonRoot, typeflag: tar.TypeDir},
		}
		for path, w := range want {
			if got, ok := fs[path]; !ok || got != w {
				t.Errorf("%s: %s is %+v (present %v), want %+v", m.Platform, path, got, ok, w)
			}
		}
		if !regexp.MustCompile(`(?m)^nonroot:x:65532:65532:`).MatchString(fs["/etc/passwd"].content) {
			t.Errorf("%s: /etc/passwd lacks the nonroot user:\n%s", m.Platform, fs["/etc/passwd"].content)
		}
	}
	if !reflect.DeepEqual(platforms, DefaultPlatforms) {
		t.Errorf("index platforms %v, want %v", platforms, DefaultPlatforms)
	}

	// Reproducible: the same inputs give the same digest.
	again, err := WriteLayout(ctx, opts, dir, "v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	if again.Digest != res.Digest {
		t.Errorf("second build %s, first %s", again.Digest, res.Digest)
	}
}

// Pushed to the real distribution registry, the image is the one the
// layout holds, under its content tag and the requested tag.
func TestPushToARegistry(t *testing.T) {
	ctx := context.Background()
	host := testregistry.Start(t)
	opts := fakeOptions(t)
	// gzip, as the layout has; a local registry would get the binary's
	// layer uncompressed by default (another digest, the same files).
	opts.Compression = source.CompressionGzip
	res, err := Push(ctx, opts, host+"/devloop/manager:dev", true)
	if err != nil {
		t.Fatal(err)
	}
	inLayout, err := WriteLayout(ctx, opts, filepath.Join(t.TempDir(), "layout"), "dev")
	if err != nil {
		t.Fatal(err)
	}
	if res.Digest != inLayout.Digest {
		t.Errorf("pushed %s, layout holds %s", res.Digest, inLayout.Digest)
	}
	if res.Reference != host+"/devloop/manager@"+res.Digest {
		t.Errorf("reference %s", res.Reference)
	}
	for _, tag := range []string{"dev", strings.TrimPrefix(res.Digest, "sha256:")} {
		ref, err := name.ParseReference(host+"/devloop/manager:"+tag, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		desc, err := remote.Head(ref, remote.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		if desc.Digest.String() != res.Digest || !desc.MediaType.IsIndex() {
			t.Errorf("tag %s names %s (%s), want the index %s", tag, desc.Digest, desc.MediaType, res.Digest)
		}
	}
}

// The Dockerfile compiles the same binary as make image.
func TestDockerfileBuildsTheSameBinary(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	df := string(data)
	for _, want := range []string{
		`CGO_ENABLED=0`,
		`go build -trimpath -ldflags "-s -w"`,
		`./cmd/manager`,
		`./cmd/supervisor`,
		`COPY --from=build /out/supervisors/ /supervisors/`,
		`FROM gcr.io/distroless/static:nonroot`,
		`USER 65532:65532`,
		`ENTRYPOINT ["/manager"]`,
	} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	if got := strings.Join(GoBuildFlags, " "); got != `-trimpath -ldflags -s -w` {
		t.Errorf("GoBuildFlags %q: update the Dockerfile and this test together", got)
	}
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	opts := fakeOptions(t)
	opts.CABundle = filepath.Join(t.TempDir(), "missing.pem")
	if _, err := WriteLayout(ctx, opts, t.TempDir(), "x"); err == nil || !strings.Contains(err.Error(), "CA bundle") {
		t.Errorf("missing CA bundle: %v", err)
	}
	if _, err := Push(ctx, fakeOptions(t), "Not A Reference", true); err == nil || !strings.Contains(err.Error(), `image reference "Not A Reference"`) {
		t.Errorf("bad reference: %v", err)
	}
	if _, _, err := Compile(ctx, Compilation{Root: testenv.RepoRoot(), OutDir: t.TempDir(), Platforms: []string{"linux"}}); err == nil || !strings.Contains(err.Error(), `platform "linux" is not os/arch`) {
		t.Errorf("bad platform: %v", err)
	}
}
