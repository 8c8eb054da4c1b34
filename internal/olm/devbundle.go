package olm

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/blang/semver/v4"
	"sigs.k8s.io/yaml"
)

// Another project's bundle, for its development loop through OLM
// (USE-CASES.md #5, stakater/ipshield in docs/real-projects.md): the
// registry+v1 bundle its `make bundle` committed, made to run the image
// the loop just built, under a version of its own, so a catalog of it
// installs that build with a ClusterExtension. What `make bundle
// IMG=... VERSION=...` would change, without operator-sdk or kustomize.

// Bundle annotations read from metadata/annotations.yaml.
const (
	annotationPackage  = "operators.operatorframework.io.bundle.package.v1"
	annotationChannels = "operators.operatorframework.io.bundle.channels.v1"
)

// DevBundleOptions say what changes in a project's bundle.
type DevBundleOptions struct {
	// Version of the development bundle, semver without a leading v.
	Version string
	// Channel the bundle is published to.
	Channel string
	// Images are the images of the CSV's deployments' containers, by
	// container name (the built operator for "manager").
	Images map[string]string
	// Drop are containers taken out of the CSV's deployments (a sidecar
	// whose image the cluster's nodes cannot pull).
	Drop []string
}

// DevBundle reads the bundle under dir (manifests/, metadata/, and
// tests/ when there) and returns its files, by path relative to the
// bundle directory, with the ClusterServiceVersion renamed to
// <package>.v<version> at that version (no replaces or skips: the
// development catalog has this bundle alone), its containers' images set
// and dropped as o says, and the channels annotation set to o.Channel. It
// also returns the package name.
func DevBundle(dir string, o DevBundleOptions) (map[string][]byte, string, error) {
	if _, err := semver.Parse(o.Version); err != nil {
		return nil, "", fmt.Errorf("version %q: %w", o.Version, err)
	}
	files := map[string][]byte{}
	for _, sub := range []string{"manifests", "metadata", "tests"} {
		err := filepath.WalkDir(filepath.Join(dir, sub), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return err
			}
			data, err := os.ReadFile(p)
			files[filepath.ToSlash(rel)] = data
			return err
		})
		if err != nil && !(sub == "tests" && os.IsNotExist(err)) {
			return nil, "", err
		}
	}
	annotations, err := bundleAnnotations(files["metadata/annotations.yaml"])
	if err != nil {
		return nil, "", err
	}
	pkg := annotations[annotationPackage]
	if pkg == "" {
		return nil, "", fmt.Errorf("%s: metadata/annotations.yaml names no package (%s)", dir, annotationPackage)
	}
	if o.Channel != "" {
		annotations[annotationChannels] = o.Channel
		if files["metadata/annotations.yaml"], err = yaml.Marshal(map[string]any{"annotations": annotations}); err != nil {
			return nil, "", err
		}
	}
	found := false
	for name, data := range files {
		if !strings.HasPrefix(name, "manifests/") {
			continue
		}
		var obj map[string]any
		if err := yaml.Unmarshal(data, &obj); err != nil || obj["kind"] != "ClusterServiceVersion" {
			continue
		}
		if err := devCSV(obj, pkg, o); err != nil {
			return nil, "", fmt.Errorf("%s: %w", name, err)
		}
		if files[name], err = yaml.Marshal(obj); err != nil {
			return nil, "", err
		}
		found = true
	}
	if !found {
		return nil, "", fmt.Errorf("%s: no ClusterServiceVersion under manifests/", dir)
	}
	return files, pkg, nil
}

// bundleAnnotations are metadata/annotations.yaml's annotations.
func bundleAnnotations(data []byte) (map[string]string, error) {
	var doc struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("metadata/annotations.yaml: %w", err)
	}
	if doc.Annotations == nil {
		doc.Annotations = map[string]string{}
	}
	return doc.Annotations, nil
}

// devCSV renames and re-versions the CSV and sets its containers.
func devCSV(csv map[string]any, pkg string, o DevBundleOptions) error {
	meta, _ := csv["metadata"].(map[string]any)
	spec, _ := csv["spec"].(map[string]any)
	if meta == nil || spec == nil {
		return fmt.Errorf("no metadata or spec")
	}
	meta["name"] = pkg + ".v" + o.Version
	spec["version"] = o.Version
	delete(spec, "replaces")
	delete(spec, "skips")
	install, _ := spec["install"].(map[string]any)
	installSpec, _ := install["spec"].(map[string]any)
	deployments, _ := installSpec["deployments"].([]any)
	set := map[string]bool{}
	for _, d := range deployments {
		dm, _ := d.(map[string]any)
		podSpec := nested(dm, "spec", "template", "spec")
		containers, _ := podSpec["containers"].([]any)
		kept := containers[:0]
		for _, c := range containers {
			cm, _ := c.(map[string]any)
			name, _ := cm["name"].(string)
			if slices.Contains(o.Drop, name) {
				continue
			}
			if img, ok := o.Images[name]; ok {
				cm["image"] = img
				set[name] = true
				if name == "manager" {
					// The console and catalog show the operator's image.
					if ann, ok := meta["annotations"].(map[string]any); ok {
						ann["containerImage"] = img
					}
				}
			}
			kept = append(kept, cm)
		}
		if podSpec != nil {
			podSpec["containers"] = kept
		}
	}
	for name := range o.Images {
		if !set[name] {
			return fmt.Errorf("no container %q in the install strategy's deployments", name)
		}
	}
	return nil
}

// nested is the map at path under m, or nil.
func nested(m map[string]any, path ...string) map[string]any {
	for _, p := range path {
		if m == nil {
			return nil
		}
		m, _ = m[p].(map[string]any)
	}
	return m
}
