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

// helmChart is a chart directory of the tree and the image references its
// values hold.
type helmChart struct {
	Dir  string // relative to the tree
	Name string
	// CRDDirs are the crds/ directories Helm installs once and never
	// upgrades: the chart's and its vendored subcharts' (charts/*/crds),
	// which --skip-crds leaves out with the chart's own.
	CRDDirs []string
	Deps    int // dependencies in Chart.yaml
	Images  []chartImage
	// templates are the chart's templates, read to tell which values
	// paths reach a custom resource rather than a workload.
	templates map[string]string
	// local are its file:// dependencies: directory → values key.
	local map[string]string
}

// foldLocalDependencies deploys a chart that another chart of the tree
// depends on through file:// (Dynamo's platform chart and its operator
// chart) with that umbrella: its image references move there, under the
// dependency's values key, and it is no longer a chart of its own.
func foldLocalDependencies(charts []*helmChart) []*helmChart {
	byDir := map[string]*helmChart{}
	for _, c := range charts {
		byDir[c.Dir] = c
	}
	folded := map[*helmChart]bool{}
	for _, c := range charts {
		for dir, key := range c.local {
			sub := byDir[dir]
			if sub == nil || sub == c {
				continue
			}
			for _, img := range sub.Images {
				img.via = sub
				img.Path = join(key, img.Path)
				img.subKey = key
				if img.TagPath != "" {
					img.TagPath = join(key, img.TagPath)
				}
				if img.RegistryPath != "" {
					img.RegistryPath = join(key, img.RegistryPath)
				}
				c.Images = append(c.Images, img)
			}
			folded[sub] = true
		}
	}
	var out []*helmChart
	for _, c := range charts {
		if !folded[c] {
			out = append(out, c)
		}
	}
	return out
}

// imageStyle is how a chart spells an image reference in its values.
type imageStyle int

const (
	// styleRepository: {repository: ghcr.io/x/y, tag: v1}.
	styleRepository imageStyle = iota
	// styleSplit: {repository: nvcr.io/nvidia, image: gpu-operator,
	// version: v1}: registry and name apart (GPU Operator).
	styleSplit
	// styleNameKey: flat keys, e.g. scheduler_image_name:
	// volcanosh/vc-scheduler next to image_registry (Volcano).
	styleNameKey
	// styleReference: image: ghcr.io/x/y:v1.
	styleReference
)

// chartImage is one image reference in a chart's values.
type chartImage struct {
	Path  string // the values path of the block (operator) or key (basic.scheduler_image_name)
	Key   string // the block's key or the flat key's prefix (operator, scheduler)
	Name  string // the image's name as the chart writes it (gpu-operator, volcanosh/vc-scheduler)
	Style imageStyle
	// TagPath is where the tag goes ("" when the chart has no tag value).
	TagPath string
	// RegistryPath is the registry value of styleNameKey.
	RegistryPath string
	// via is the subchart whose templates read the reference, and subKey
	// its values key in the umbrella, for a reference folded into an
	// umbrella chart (nil: the chart's own).
	via    *helmChart
	subKey string
}

// shortName is the last path segment of the chart's image name ("" when
// the chart leaves the name empty).
func (c chartImage) shortName() string {
	if c.Name == "" {
		return ""
	}
	return path.Base(c.Name)
}

// readChart reads Chart.yaml, values.yaml and the templates of a chart.
func readChart(root, rel string) (*helmChart, error) {
	dir := filepath.Join(root, filepath.FromSlash(rel))
	var meta struct {
		Name         string `json:"name"`
		Dependencies []struct {
			Name       string `json:"name"`
			Alias      string `json:"alias"`
			Repository string `json:"repository"`
		} `json:"dependencies"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(data, &meta); err != nil {
		return nil, err
	}
	c := &helmChart{Dir: rel, Name: meta.Name, Deps: len(meta.Dependencies), templates: map[string]string{}, local: map[string]string{}}
	for _, d := range meta.Dependencies {
		if dir, ok := strings.CutPrefix(d.Repository, "file://"); ok {
			key := d.Name
			if d.Alias != "" {
				key = d.Alias
			}
			c.local[path.Clean(path.Join(rel, dir))] = key
		}
	}
	c.CRDDirs = chartCRDDirs(root, rel)
	entries, _ := os.ReadDir(filepath.Join(dir, "templates"))
	for _, e := range entries {
		if b, err := os.ReadFile(filepath.Join(dir, "templates", e.Name())); err == nil && !e.IsDir() {
			c.templates[e.Name()] = string(b)
		}
	}
	values := map[string]any{}
	if b, err := os.ReadFile(filepath.Join(dir, "values.yaml")); err == nil {
		_ = yaml.Unmarshal(b, &values) // a values file init cannot read has no images to offer
	}
	c.Images = c.findImages("", values)
	sort.Slice(c.Images, func(i, j int) bool { return c.Images[i].Path < c.Images[j].Path })
	return c, nil
}

// join is a values path.
func join(p, k string) string {
	if p == "" {
		return k
	}
	return p + "." + k
}

var nameKey = regexp.MustCompile(`^(.*?)_?(image_name|imageName)$`)

// findImages walks values for the image spellings of imageStyle.
func (c *helmChart) findImages(p string, m map[string]any) []chartImage {
	var out []chartImage
	repo, hasRepo := m["repository"].(string)
	if hasRepo && repo != "" {
		img := chartImage{Path: p, Key: path.Base(strings.ReplaceAll(p, ".", "/")), Style: styleRepository, Name: repoPath(repo)}
		if name, ok := m["image"].(string); ok && name != "" {
			img.Style, img.Name = styleSplit, name
		}
		for _, t := range []string{"tag", "version"} {
			if _, ok := m[t]; ok || c.referenced(join(p, t)) {
				img.TagPath = join(p, t)
				break
			}
		}
		// An "image" block under a component key names the component:
		// manager.image.repository is the manager's image.
		if img.Key == "image" && strings.Contains(p, ".") {
			img.Key = path.Base(path.Dir(strings.ReplaceAll(p, ".", "/")))
		}
		out = append(out, img)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch v := m[k].(type) {
		case map[string]any:
			out = append(out, c.findImages(join(p, k), v)...)
		case string:
			if mm := nameKey.FindStringSubmatch(k); mm != nil && v != "" {
				out = append(out, c.nameKeyImage(p, k, mm[1], v, m))
			} else if k == "image" && !hasRepo && strings.ContainsAny(v, "/:") && !strings.Contains(v, "{{") {
				out = append(out, chartImage{Path: join(p, k), Key: path.Base(strings.ReplaceAll(p, ".", "/")), Name: repoPath(v), Style: styleReference})
			} else if prefix, ok := strings.CutSuffix(k, "Image"); ok && prefix != "" && !strings.Contains(v, "{{") {
				// An override of a whole reference, often empty by
				// default (OCM's images.overrides.registrationImage).
				img := chartImage{Path: join(p, k), Key: prefix, Style: styleReference}
				if v != "" {
					img.Name = repoPath(v)
				}
				out = append(out, img)
			}
		}
	}
	return out
}

// nameKeyImage is a flat name key (scheduler_image_name) with the tag and
// registry keys next to it.
func (c *helmChart) nameKeyImage(p, k, prefix, name string, m map[string]any) chartImage {
	img := chartImage{Path: join(p, k), Key: prefix, Name: name, Style: styleNameKey}
	sep := "_"
	if strings.HasSuffix(k, "imageName") {
		sep = ""
	}
	for _, t := range []string{prefix + sep + "image_tag_version", prefix + sep + "image_tag", prefix + sep + "imageTag", prefix + sep + "tag"} {
		if _, ok := m[t]; ok {
			img.TagPath = join(p, t)
			break
		}
	}
	for _, r := range []string{"image_registry", "imageRegistry", "registry"} {
		if _, ok := m[r]; ok {
			img.RegistryPath = join(p, r)
			break
		}
	}
	return img
}

// repoPath is a repository without its registry host: the part a chart's
// image name and devloop's image name compare on.
func repoPath(ref string) string {
	parts := strings.Split(withoutTag(ref), "/")
	if len(parts) > 1 && strings.ContainsAny(parts[0], ".:") {
		parts = parts[1:]
	}
	return strings.ToLower(strings.Join(parts, "/"))
}

// referenced says whether a template reads .Values.<p>.
func (c *helmChart) referenced(p string) bool {
	for _, t := range c.templates {
		if strings.Contains(t, ".Values."+p) {
			return true
		}
	}
	return false
}

// podKinds are the kinds devloop pins built images in; a values path
// that reaches only other kinds (a custom resource) is read by an operator
// that starts pods from it later, by tag.
var podKinds = map[string]bool{
	"Deployment": true, "StatefulSet": true, "DaemonSet": true, "Job": true, "CronJob": true,
	"Pod": true, "ReplicaSet": true,
}

var kindLine = regexp.MustCompile(`(?m)^kind:\s*([A-Za-z0-9]+)`)

// reachesCustomResource says whether the image block at p is written into a
// template that declares no workload but some other kind: the operator
// under development reads the reference from its custom resource and
// creates the pods itself (GPU Operator's ClusterPolicy validator), so
// the reference must be a tag that exists, not a digest devloop pins.
func (c *helmChart) reachesCustomResource(img chartImage) bool {
	if img.via != nil {
		sub := img
		sub.via, sub.Path = nil, strings.TrimPrefix(img.Path, img.subKey+".")
		return img.via.reachesCustomResource(sub)
	}
	// The keys that make the reference, not the block: the operator's
	// block may also hold settings its custom resource reads.
	needles := []string{".Values." + img.Path}
	switch img.Style {
	case styleRepository:
		needles = []string{".Values." + join(img.Path, "repository")}
	case styleSplit:
		needles = []string{".Values." + join(img.Path, "repository"), ".Values." + join(img.Path, "image")}
	}
	for _, t := range c.templates {
		if !containsAny(t, needles) {
			continue
		}
		kinds := kindLine.FindAllStringSubmatch(t, -1)
		workload, other := false, false
		for _, k := range kinds {
			if podKinds[k[1]] {
				workload = true
			} else if !builtinKinds[k[1]] {
				other = true
			}
		}
		if other && !workload {
			return true
		}
	}
	return false
}

// builtinKinds are Kubernetes kinds that are not custom resources.
var builtinKinds = map[string]bool{
	"Service": true, "ConfigMap": true, "Secret": true, "ServiceAccount": true, "Role": true, "ClusterRole": true,
	"RoleBinding": true, "ClusterRoleBinding": true, "Namespace": true, "Ingress": true, "NetworkPolicy": true,
	"PodDisruptionBudget": true, "HorizontalPodAutoscaler": true, "PersistentVolumeClaim": true,
	"CustomResourceDefinition": true, "MutatingWebhookConfiguration": true, "ValidatingWebhookConfiguration": true,
	"APIService": true, "PriorityClass": true, "StorageClass": true, "RuntimeClass": true, "List": true,
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// chartCRDDirs is the chart at rel's crds/ and those of the subcharts
// vendored (unpacked) under its charts/, depth first. A packaged subchart
// (charts/*.tgz) is not a directory a manifests component can apply.
func chartCRDDirs(root, rel string) []string {
	var dirs []string
	dir := filepath.Join(root, filepath.FromSlash(rel))
	if fi, err := os.Stat(filepath.Join(dir, "crds")); err == nil && fi.IsDir() {
		dirs = append(dirs, path.Join(rel, "crds"))
	}
	subs, _ := os.ReadDir(filepath.Join(dir, "charts"))
	for _, e := range subs {
		if e.IsDir() {
			dirs = append(dirs, chartCRDDirs(root, path.Join(rel, "charts", e.Name()))...)
		}
	}
	return dirs
}
