package deploy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/internal/fault"
)

// kustomizationFile is the name of dir's kustomization file, or "".
func kustomizationFile(dir string) string {
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		if info, err := os.Stat(filepath.Join(dir, name)); err == nil && !info.IsDir() {
			return name
		}
	}
	return ""
}

// buildKustomization runs `kustomize build dir` with a loader that cannot
// reach the network (kustomizeOffline). Before that, every kustomization
// it would load is checked for remote references and for paths leaving
// root, for a clear message naming the file; the filesystem krusty reads
// then refuses anything outside root as well, which catches symlinks and
// fields the check does not know.
func buildKustomization(root, dir string, builds *buildCache) ([]*unstructured.Unstructured, error) {
	rel, _ := filepath.Rel(root, dir)
	if err := checkKustomization(root, dir, map[string]bool{}); err != nil {
		return nil, fault.Permanent(err)
	}
	objs, err := kustomizeOffline(context.Background(), root, dir, builds)
	if err != nil {
		return nil, fault.Permanentf("kustomize build %s: %v", rel, err)
	}
	return objs, nil
}

// checkKustomization walks the kustomizations reachable from dir through
// resources, components and bases.
func checkKustomization(root, dir string, visited map[string]bool) error {
	if visited[dir] {
		return nil
	}
	visited[dir] = true
	name := kustomizationFile(dir)
	relFile, _ := filepath.Rel(root, filepath.Join(dir, name))
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return fmt.Errorf("%s: %w", relFile, err)
	}
	var k types.Kustomization
	if err := yaml.Unmarshal(data, &k); err != nil {
		return fmt.Errorf("%s: %w", relFile, err)
	}
	// Entries that may name another kustomization (or a git URL).
	for _, entry := range concat(k.Resources, k.Components, k.Bases) {
		if isRemote(entry) {
			return fmt.Errorf("%s: remote resource %q is not allowed: vendor it into the source", relFile, entry)
		}
		target, err := insideRoot(root, filepath.Join(dir, entry))
		if err != nil {
			return fmt.Errorf("%s: resource %q %v", relFile, entry, err)
		}
		if info, err := os.Stat(target); err == nil && info.IsDir() && kustomizationFile(target) != "" {
			if err := checkKustomization(root, target, visited); err != nil {
				return err
			}
		}
	}
	// Entries that name files; krusty fetches those that are URLs.
	files := concat(k.Crds, k.Configurations, k.Generators, k.Transformers, k.Validators)
	for _, p := range append(append([]types.Patch{}, k.Patches...), k.PatchesJson6902...) {
		files = append(files, p.Path)
	}
	for _, p := range k.PatchesStrategicMerge {
		// A one-line entry is a path (an inline patch spans lines).
		if !strings.Contains(string(p), "\n") {
			files = append(files, string(p))
		}
	}
	for _, r := range k.Replacements {
		files = append(files, r.Path)
	}
	for _, g := range k.ConfigMapGenerator {
		files = append(append(files, g.FileSources...), append(g.EnvSources, g.EnvSource)...)
	}
	for _, g := range k.SecretGenerator {
		files = append(append(files, g.FileSources...), append(g.EnvSources, g.EnvSource)...)
	}
	for _, f := range files {
		if isRemote(f) {
			return fmt.Errorf("%s: remote file %q is not allowed: vendor it into the source", relFile, f)
		}
	}
	return nil
}

// isRemote reports whether krusty would fetch entry over the network: a URL
// (git or HTTP), scp-style git, or kustomize's repo//path and ?ref= forms.
// Generator file sources may be written key=path.
func isRemote(entry string) bool {
	if _, after, ok := strings.Cut(entry, "="); ok && !strings.Contains(entry, "?") {
		entry = after
	}
	lower := strings.ToLower(entry)
	return strings.Contains(entry, "://") || gitUser.MatchString(entry) ||
		strings.HasPrefix(lower, "git::") || strings.HasPrefix(lower, "github.com/") || strings.HasPrefix(lower, "github.com:") ||
		strings.Contains(entry, "?ref=") || strings.Contains(entry, "?version=") ||
		strings.Contains(strings.TrimPrefix(entry, "./"), "//")
}

// gitUser is the user@ that starts an scp-style git address
// (deploy@host:repo.git), which kustomize clones.
var gitUser = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9-]*@`)

func concat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}
