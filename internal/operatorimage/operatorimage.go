// Package operatorimage builds devloop's own operator image without Docker:
// the manager binary compiled per platform (CGO_ENABLED=0) on a static,
// distroless-like base made here (no public registry is needed), assembled
// and pushed by internal/image — the code that assembles users' images — as a
// multi-platform index, to a registry or into an OCI layout.
//
// The image runs as the nonroot user 65532 with /manager as entrypoint; it
// is also the helper image builder pods run (`manager helper ...`).
package operatorimage

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/image"
	"github.com/devloop-dev/devloop/internal/source"
)

// DefaultPlatforms are the platforms `make image` builds.
var DefaultPlatforms = []string{"linux/amd64", "linux/arm64"}

// DefaultCABundle is Debian's CA bundle.
const DefaultCABundle = "/etc/ssl/certs/ca-certificates.crt"

// Options say what goes into the image.
type Options struct {
	// Binaries maps "os/arch" to a compiled manager binary; its keys are
	// the platforms of the image. Compile makes them.
	Binaries map[string]string
	// Supervisors maps "os/arch" to a compiled cmd/supervisor: every
	// platform's image carries all of them, under image.SupervisorDir,
	// for the live-updatable images the operator builds for any of those
	// platforms.
	Supervisors map[string]string
	// CABundle is the PEM file copied to /etc/ssl/certs/ca-certificates.crt;
	// empty means DefaultCABundle.
	CABundle string
	// SourceURL and Revision become the image's OCI labels.
	SourceURL, Revision string
	// Compression of the binary's layer: auto (none for a local
	// registry, see source.LocalRegistry) unless set.
	Compression source.Compression
}

// Result is what was built.
type Result struct {
	// Reference is repository@digest (for a layout: the layout's path@digest).
	Reference string
	// Digest of the index (or of the image, for one platform).
	Digest string
	// Tags that name Digest: the content tag, then the requested tag.
	Tags []string
}

// Push builds the image and pushes it to ref (host/path/name:tag): the base
// and the per-platform images by digest, then the index, then the content
// tag and ref's tag, all naming the one digest (internal/image's order).
// insecure allows plain HTTP to ref's registry.
func Push(ctx context.Context, opts Options, ref string, insecure bool) (*Result, error) {
	var nameOpts []name.Option
	if insecure {
		nameOpts = append(nameOpts, name.Insecure)
	}
	tag, err := name.NewTag(ref, nameOpts...)
	if err != nil {
		return nil, fmt.Errorf("image reference %q: %w", ref, err)
	}
	repo := tag.Context().RegistryStr() + "/" + tag.Context().RepositoryStr()
	prefix, repoName := repo[:strings.LastIndex(repo, "/")], repo[strings.LastIndex(repo, "/")+1:]
	b, err := image.NewBuilder(image.Registry{Prefix: prefix, Insecure: insecure, Compression: opts.Compression})
	if err != nil {
		return nil, err
	}
	caBundle := opts.CABundle
	if caBundle == "" {
		caBundle = DefaultCABundle
	}
	ca, err := readCABundle(caBundle)
	if err != nil {
		return nil, err
	}
	if len(opts.Binaries) == 0 {
		return nil, fmt.Errorf("no manager binary: nothing to build")
	}

	pushed := map[string]v1.Hash{}
	for platform, bin := range opts.Binaries {
		p, err := v1.ParsePlatform(platform)
		if err != nil {
			return nil, fmt.Errorf("platform %q: %w", platform, err)
		}
		base, err := staticBase(*p, ca)
		if err != nil {
			return nil, err
		}
		baseDigest, _, err := b.PushImage(ctx, repoName, base)
		if err != nil {
			return nil, fmt.Errorf("pushing the %s base: %w", platform, err)
		}
		dir, err := stage(bin, opts.Supervisors)
		if err != nil {
			return nil, err
		}
		layers := []v1alpha1.LayerMapping{{From: "manager", To: "/manager", Mode: "0755"}}
		if len(opts.Supervisors) > 0 {
			layers = append(layers, v1alpha1.LayerMapping{From: "supervisors", To: image.SupervisorDir, Mode: "0755"})
		}
		img, err := b.Assemble(ctx, image.Spec{
			Name:       repoName,
			Base:       b.Repository(repoName) + "@" + baseDigest.String(),
			Layers:     layers,
			Entrypoint: []string{"/manager"},
			User:       fmt.Sprintf("%d:%d", NonRoot, NonRoot),
			SourceURL:  opts.SourceURL,
			Revision:   opts.Revision,
		}, platform, dir)
		if err == nil {
			// The layer is read again from dir when its blob is not kept in
			// memory (a large uncompressed one), so dir goes after the push.
			pushed[p.String()], _, err = b.PushImage(ctx, repoName, img)
		}
		os.RemoveAll(dir)
		if err != nil {
			return nil, err
		}
	}
	res, err := b.Publish(ctx, repoName, pushed, func(string) ([]string, error) { return []string{tag.TagStr()}, nil })
	if err != nil {
		return nil, err
	}
	return &Result{Reference: res.Repository + "@" + res.Digest, Digest: res.Digest, Tags: res.Tags}, nil
}

// WriteLayout builds the image into an OCI image layout at dir (replaced if
// present), its index annotated with tag as org.opencontainers.image.ref.name.
// The build runs against a registry in memory on the loopback address, so
// the layout holds exactly what Push would push.
func WriteLayout(ctx context.Context, opts Options, dir, tag string) (*Result, error) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	// The layout is what gets shipped to other registries: gzip, though
	// the registry it is built against is local.
	opts.Compression = source.CompressionGzip
	res, err := Push(ctx, opts, host+"/devloop/manager:"+tag, true)
	if err != nil {
		return nil, err
	}
	ref, err := name.NewDigest(res.Reference, name.Insecure)
	if err != nil {
		return nil, err
	}
	desc, err := remote.Get(ref, remote.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return nil, err
	}
	annotations := layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag})
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return nil, err
		}
		err = p.AppendIndex(idx, annotations)
	} else {
		img, err2 := desc.Image()
		if err2 != nil {
			return nil, err2
		}
		err = p.AppendImage(img, annotations)
	}
	if err != nil {
		return nil, fmt.Errorf("writing the OCI layout %s: %w", dir, err)
	}
	return &Result{Reference: dir + "@" + res.Digest, Digest: res.Digest, Tags: []string{tag}}, nil
}

// stage links (or copies) bin as "manager", and each supervisor as
// supervisors/supervisor-<os>-<arch>, into a new directory: the source
// directory of internal/image's layer mappings.
func stage(bin string, supervisors map[string]string) (string, error) {
	dir, err := os.MkdirTemp("", "devloop-image-")
	if err != nil {
		return "", err
	}
	if err := linkOrCopy(bin, filepath.Join(dir, "manager")); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("manager binary: %w", err)
	}
	for platform, sup := range supervisors {
		p, err := v1.ParsePlatform(platform)
		if err == nil {
			err = os.MkdirAll(filepath.Join(dir, "supervisors"), 0o755)
		}
		if err == nil {
			err = linkOrCopy(sup, filepath.Join(dir, "supervisors", image.SupervisorName(*p)))
		}
		if err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("supervisor for %s: %w", platform, err)
		}
	}
	return dir, nil
}

// linkOrCopy hard-links src at dst, or copies it (mode 0755) across
// file systems.
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o755)
}
