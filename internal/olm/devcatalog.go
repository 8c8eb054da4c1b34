package olm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/image"
)

// PushProjectBundle pushes the bundle under bundleDir (as DevBundle
// returns it, written by WriteDir) as <prefix>/<name>:<tag>, labelled with
// its metadata/annotations.yaml as `make bundle-build` labels it from
// bundle.Dockerfile, and returns repository@digest.
func PushProjectBundle(ctx context.Context, bundleDir, prefix, name, tag string, insecure bool) (string, error) {
	data, err := os.ReadFile(filepath.Join(bundleDir, "metadata", "annotations.yaml"))
	if err != nil {
		return "", err
	}
	labels, err := bundleAnnotations(data)
	if err != nil {
		return "", err
	}
	layers := []v1alpha1.LayerMapping{{From: "manifests", To: "/manifests"}, {From: "metadata", To: "/metadata"}}
	if _, err := os.Stat(filepath.Join(bundleDir, "tests")); err == nil {
		layers = append(layers, v1alpha1.LayerMapping{From: "tests", To: "/tests"})
	}
	b, err := image.NewBuilder(image.Registry{Prefix: prefix, Insecure: insecure})
	if err != nil {
		return "", err
	}
	return pushLabelled(ctx, b, name, tag, bundleDir, layers, labels)
}

// PushProjectCatalog pushes the file-based catalog directory catalogDir
// (catalogDir/<pkg>/catalog.yaml) as <prefix>/<name>:<tag>, at /configs
// and labelled for catalogd, and returns repository@digest.
func PushProjectCatalog(ctx context.Context, catalogDir, pkg, prefix, name, tag string, insecure bool) (string, error) {
	b, err := image.NewBuilder(image.Registry{Prefix: prefix, Insecure: insecure})
	if err != nil {
		return "", err
	}
	return pushLabelled(ctx, b, name, tag, catalogDir,
		[]v1alpha1.LayerMapping{{From: pkg, To: "/configs/" + pkg}}, map[string]string{CatalogConfigsLabel: "/configs"})
}

// RenderProjectCatalog is the file-based catalog of one pushed bundle, in
// the shape of a project's catalog/ (its package.yaml, a channel, the
// bundle as `opm render` of its image makes it, as the project's
// generate-catalog-index.sh does): the package with channel as its default
// channel, the channel with the bundle alone. plainHTTP lets opm pull over
// plain HTTP.
func RenderProjectCatalog(ctx context.Context, opm string, packageYAML []byte, channel, bundleRef string, plainHTTP bool) ([]byte, error) {
	var pkg map[string]any
	if err := yaml.Unmarshal(packageYAML, &pkg); err != nil {
		return nil, fmt.Errorf("package.yaml: %w", err)
	}
	name, _ := pkg["name"].(string)
	if pkg["schema"] != "olm.package" || name == "" {
		return nil, fmt.Errorf("package.yaml: not an olm.package with a name")
	}
	pkg["defaultChannel"] = channel
	args := []string{"render", "-o", "yaml", bundleRef}
	if plainHTTP {
		args = append(args, "--use-http")
	}
	rendered, err := runOpm(ctx, opm, args...)
	if err != nil {
		return nil, err
	}
	var bundle struct {
		Schema, Name, Package string
	}
	if err := yaml.Unmarshal(bytes.TrimPrefix(rendered, []byte("---\n")), &bundle); err != nil || bundle.Schema != "olm.bundle" {
		return nil, fmt.Errorf("opm render %s: not one olm.bundle (%v)", bundleRef, err)
	}
	if bundle.Package != name {
		return nil, fmt.Errorf("bundle %s is of package %q, package.yaml names %q", bundleRef, bundle.Package, name)
	}
	ch := map[string]any{"schema": "olm.channel", "package": name, "name": channel,
		"entries": []any{map[string]any{"name": bundle.Name}}}
	var out bytes.Buffer
	for _, doc := range []any{pkg, ch} {
		data, err := yaml.Marshal(doc)
		if err != nil {
			return nil, err
		}
		out.Write(data)
		out.WriteString("---\n")
	}
	out.Write(bytes.TrimPrefix(rendered, []byte("---\n")))
	return out.Bytes(), nil
}

// ValidateCatalog runs `opm validate` on a file-based catalog directory.
func ValidateCatalog(ctx context.Context, opm, dir string) error {
	_, err := runOpm(ctx, opm, "validate", dir)
	return err
}

// runOpm runs opm with a signature policy of its own (containers/image
// wants one) and returns its output; a failure carries the end of its
// stderr.
func runOpm(ctx context.Context, opm string, args ...string) ([]byte, error) {
	home, err := os.MkdirTemp("", "devloop-opm-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(home)
	policy := filepath.Join(home, ".config", "containers", "policy.json")
	if err := os.MkdirAll(filepath.Dir(policy), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(policy, []byte(`{"default":[{"type":"insecureAcceptAnything"}]}`), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, opm, args...)
	cmd.Env = append(os.Environ(), "HOME="+home)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("opm %s: %v\n%s", args[0], err, lastLines(stderr.String(), 20))
	}
	return out, nil
}
