package olm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/image"
)

// Publishing a bundle to a registry of one's own, as a release does to the
// public one but with any manager image: the end-to-end suite installs
// devloop this way with real OLM v1 controllers.

// PushBundleDir pushes the bundle under bundleDir (manifests/ and
// metadata/, as Bundle writes them) as <prefix>/devloop-bundle:v<version>
// and returns repository@digest.
func PushBundleDir(ctx context.Context, bundleDir, prefix, version string, insecure bool) (string, error) {
	if filepath.Base(bundleDir) != "bundle" {
		return "", fmt.Errorf("%s: the bundle directory must be named bundle", bundleDir)
	}
	b, err := image.NewBuilder(image.Registry{Prefix: prefix, Insecure: insecure})
	if err != nil {
		return "", err
	}
	return pushBundle(ctx, b, filepath.Dir(bundleDir), version)
}

// PushCatalogDir pushes a file-based catalog directory (catalogDir/devloop
// holds the package) as <prefix>/devloop-catalog:<tag>, labelled for
// catalogd, and returns repository@digest.
func PushCatalogDir(ctx context.Context, catalogDir, prefix, tag string, insecure bool) (string, error) {
	b, err := image.NewBuilder(image.Registry{Prefix: prefix, Insecure: insecure})
	if err != nil {
		return "", err
	}
	ref, err := pushLabelled(ctx, b, "devloop-catalog", tag, catalogDir,
		[]v1alpha1.LayerMapping{{From: Package, To: "/configs/" + Package}}, map[string]string{CatalogConfigsLabel: "/configs"})
	if err != nil {
		return "", fmt.Errorf("catalog image: %w", err)
	}
	return ref, nil
}

// RenderSemverCatalog renders the file-based catalog of a semver template
// listing bundles (pushed image references, oldest first) in both the
// Fast and Stable channels, with opm as make catalog does. plainHTTP lets
// opm pull them over plain HTTP.
func RenderSemverCatalog(ctx context.Context, opm string, bundles []string, plainHTTP bool) ([]byte, error) {
	if len(bundles) == 0 {
		return nil, fmt.Errorf("no bundles to render a catalog of")
	}
	var list []map[string]string
	for _, b := range bundles {
		list = append(list, map[string]string{"Image": b})
	}
	tmpl, err := yaml.Marshal(map[string]any{
		"Schema":                "olm.semver",
		"GenerateMajorChannels": true,
		"GenerateMinorChannels": false,
		"Fast":                  map[string]any{"Bundles": list},
		"Stable":                map[string]any{"Bundles": list},
	})
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "devloop-catalog-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	tmplFile := filepath.Join(dir, "semver-template.yaml")
	if err := os.WriteFile(tmplFile, tmpl, 0o644); err != nil {
		return nil, err
	}
	// opm's containers/image wants a signature policy; this one serves
	// only this run.
	policy := filepath.Join(dir, ".config", "containers", "policy.json")
	if err := os.MkdirAll(filepath.Dir(policy), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(policy, []byte(`{"default":[{"type":"insecureAcceptAnything"}]}`), 0o644); err != nil {
		return nil, err
	}
	args := []string{"alpha", "render-template", "semver", "-o", "yaml", tmplFile}
	if plainHTTP {
		args = append(args[:3], append([]string{"--use-http"}, args[3:]...)...)
	}
	cmd := exec.CommandContext(ctx, opm, args...)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("opm alpha render-template semver: %v\n%s", err, lastLines(stderr.String(), 20))
	}
	return bytes.TrimPrefix(out, []byte("---\n")), nil
}

// lastLines keeps an error message bounded.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
