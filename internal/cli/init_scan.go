package cli

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// treeScan is everything init read of a tree.
type treeScan struct {
	Root        string
	Modules     []*goModule
	Mains       []goMain
	Dockerfiles []*dockerfile
	Charts      []*helmChart
	// CRDDirs are directories of CRD manifests outside charts
	// (config/crd/bases).
	CRDDirs []string
	// Kustomizations are kustomize entry points (config/default).
	Kustomizations []*kustomization
	Tilt           *tiltHints
}

// kustomization is a config/default kustomization: what it includes and
// the image its manager Deployment ends up with.
type kustomization struct {
	Dir         string
	IncludesCRD bool
	// Image is the repository the manager's Deployment runs after
	// kustomize's images: transformer (config/manager's newName), or as
	// manager.yaml writes it.
	Image string
}

// scanTree reads a tree: it walks it once, skipping what is not the
// team's own code, and reads each file init understands.
func scanTree(root string) (*treeScan, error) {
	s := &treeScan{Root: root}
	var modDirs, chartDirs, kustomizeDirs, dockerfiles []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if p != root && (skippedDirs[d.Name()] || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			// A chart's subcharts are deployed with it.
			if d.Name() == "charts" && fileExists(filepath.Join(filepath.Dir(p), "Chart.yaml")) {
				return filepath.SkipDir
			}
			return nil
		}
		dir := path.Dir(rel)
		switch n := d.Name(); {
		case n == "go.mod":
			modDirs = append(modDirs, dir)
		case n == "Chart.yaml":
			chartDirs = append(chartDirs, dir)
		case n == "kustomization.yaml" && path.Base(dir) == "default" && path.Base(path.Dir(dir)) == "config":
			kustomizeDirs = append(kustomizeDirs, dir)
		case n == "Dockerfile" || strings.HasPrefix(n, "Dockerfile.") || strings.HasSuffix(n, ".Dockerfile") || strings.HasSuffix(n, ".dockerfile"):
			dockerfiles = append(dockerfiles, rel)
		case n == "Tiltfile" && dir == ".":
			s.Tilt, err = readTiltfile(p)
			return err
		}
		if strings.HasSuffix(rel, "config/crd/bases/"+d.Name()) && strings.HasSuffix(d.Name(), ".yaml") && !contains(s.CRDDirs, dir) {
			s.CRDDirs = append(s.CRDDirs, dir)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	nested := map[string]bool{}
	for _, d := range modDirs {
		nested[d] = true
	}
	for _, d := range modDirs {
		modPath, goVersion, err := readGoMod(filepath.Join(root, filepath.FromSlash(d), "go.mod"))
		if err != nil {
			return nil, err
		}
		m := &goModule{Dir: d, Path: modPath, GoVersion: goVersion}
		s.Modules = append(s.Modules, m)
		s.Mains = append(s.Mains, mainsOf(root, m, nested)...)
	}
	for _, d := range chartDirs {
		if c, err := readChart(root, d); err == nil {
			s.Charts = append(s.Charts, c)
		}
	}
	for _, d := range kustomizeDirs {
		s.Kustomizations = append(s.Kustomizations, readKustomization(root, d))
	}
	for _, f := range dockerfiles {
		if d, err := readDockerfile(filepath.Join(root, filepath.FromSlash(f)), f); err == nil {
			s.Dockerfiles = append(s.Dockerfiles, d)
		}
	}
	sort.Slice(s.Charts, func(i, j int) bool { return s.Charts[i].Dir < s.Charts[j].Dir })
	s.Charts = foldLocalDependencies(s.Charts)
	return s, nil
}

// readKustomization reads config/default and config/manager of a
// kubebuilder layout.
func readKustomization(root, dir string) *kustomization {
	k := &kustomization{Dir: dir}
	var def struct {
		Resources []string `json:"resources"`
		Bases     []string `json:"bases"`
	}
	readYAML(filepath.Join(root, dir, "kustomization.yaml"), &def)
	for _, r := range append(def.Resources, def.Bases...) {
		if path.Base(path.Clean(r)) == "crd" {
			k.IncludesCRD = true
		}
	}
	manager := path.Join(path.Dir(dir), "manager")
	var kust struct {
		Images []struct {
			Name    string `json:"name"`
			NewName string `json:"newName"`
		} `json:"images"`
	}
	readYAML(filepath.Join(root, manager, "kustomization.yaml"), &kust)
	written := ""
	if b, err := os.ReadFile(filepath.Join(root, manager, "manager.yaml")); err == nil {
		if m := imageLine.FindStringSubmatch(string(b)); m != nil {
			written = m[1]
		}
	}
	k.Image = withoutTag(written)
	for _, im := range kust.Images {
		if im.NewName != "" && (written == "" || repoPath(im.Name) == repoPath(written)) {
			k.Image = withoutTag(im.NewName)
		}
	}
	return k
}

// withoutTag is a reference's repository as written, host included.
func withoutTag(ref string) string {
	ref = strings.SplitN(ref, "@", 2)[0]
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return ref
}

var imageLine = regexp.MustCompile(`(?m)^\s*-?\s*image:\s*["']?([^\s"']+)`)

// readYAML reads a YAML file into v; a missing or unreadable file leaves v
// as it was (init guesses from what it can read).
func readYAML(file string, v any) {
	if b, err := os.ReadFile(file); err == nil {
		_ = yaml.Unmarshal(b, v)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// tiltHints are what a Tiltfile names, found by reading its calls' first
// string arguments: the Starlark is never run.
type tiltHints struct {
	Images    []string // docker_build, docker_build_with_restart, custom_build
	YAML      []string // k8s_yaml, kustomize, helm
	Resources []string // k8s_resource, local_resource
	LiveSync  bool     // live_update with sync()
	SyncTo    []string // the container paths sync() writes
}

var tiltSync = regexp.MustCompile(`\bsync\(\s*['"][^'"]+['"]\s*,\s*['"]([^'"]+)['"]`)

var tiltCall = regexp.MustCompile(`\b(docker_build_with_restart|docker_build|custom_build|k8s_yaml|kustomize|helm|k8s_resource|local_resource)\(\s*(?:[a-z_]+\s*=\s*)?['"]([^'"]+)['"]`)

func readTiltfile(file string) (*tiltHints, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	t := &tiltHints{LiveSync: strings.Contains(string(b), "sync(")}
	for _, m := range tiltSync.FindAllStringSubmatch(string(b), -1) {
		t.SyncTo = appendUnique(t.SyncTo, path.Clean(m[1]))
	}
	for _, m := range tiltCall.FindAllStringSubmatch(string(b), -1) {
		switch m[1] {
		case "docker_build", "docker_build_with_restart", "custom_build":
			t.Images = appendUnique(t.Images, m[2])
		case "k8s_yaml", "kustomize", "helm":
			t.YAML = appendUnique(t.YAML, m[2])
		default:
			t.Resources = appendUnique(t.Resources, m[2])
		}
	}
	return t, nil
}

func appendUnique(list []string, s string) []string {
	if contains(list, s) {
		return list
	}
	return append(list, s)
}
