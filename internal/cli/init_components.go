package cli

import (
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

const maxInitCharts = 4

// components makes the DAG: a component per chart (or kustomization) that
// deploys built images, with its CRDs as a manifests component before it,
// and a component of images alone when nothing in the tree deploys them.
func (d *draft) components(s *treeScan, bindings map[int][]binding, images map[int]*v1alpha1.ImageSpec) {
	placed := map[int]bool{}
	charts := s.Charts
	if len(bindings) > 0 {
		charts = nil
		for _, c := range s.Charts {
			if chartBound(c, bindings) {
				charts = append(charts, c)
			}
		}
	}
	if len(charts) > maxInitCharts {
		d.note("%d charts; the first %d are deployed", len(charts), maxInitCharts)
		charts = charts[:maxInitCharts]
	}
	for _, c := range charts {
		comp := v1alpha1.Component{Name: d.uniqueName(dnsLabel(c.Name))}
		comp.Helm = &v1alpha1.HelmSpec{
			Chart:       v1alpha1.ChartRef{Source: initSource, Path: c.Dir},
			ReleaseName: comp.Name, Namespace: comp.Name, CreateNamespace: true,
		}
		d.note("component %s: chart %s, release and namespace %s", comp.Name, c.Dir, comp.Name)
		if c.Deps > 0 {
			d.note("chart %s has %d dependencies: devloop resolves them as `helm dependency build` does", c.Dir, c.Deps)
		}
		d.noteCustomResourceHealth(c)
		if crds := d.crdComponent(s, c, nil); crds != "" {
			comp.DependsOn = []string{crds}
			comp.Helm.SkipCRDs = len(c.CRDDirs) > 0
		}
		for _, i := range sortedKeys(images) {
			for _, b := range bindings[i] {
				if b.Chart != c {
					continue
				}
				if !placed[i] {
					comp.Images = append(comp.Images, *images[i])
					placed[i] = true
				}
				comp.Helm.ImageValues = appendImageValues(comp.Helm.ImageValues, images[i], b, c)
				d.note("%s -> image %s: %s", b.Image.Path, images[i].Name, b.Why)
			}
		}
		d.boundImageValues(&comp)
		d.Spec.Components = append(d.Spec.Components, comp)
	}
	if len(charts) == 0 {
		for _, k := range s.Kustomizations {
			comp := v1alpha1.Component{Name: d.uniqueName(dnsLabel(path.Base(path.Dir(path.Dir(k.Dir))) + "-manager"))}
			if path.Dir(path.Dir(k.Dir)) == "." {
				comp.Name = d.uniqueName("manager")
			}
			comp.Manifests = &v1alpha1.ManifestsSpec{Source: initSource, Paths: []string{k.Dir}}
			d.note("component %s: kustomize build %s, applied server-side (namespace and names as the kustomization sets them)", comp.Name, k.Dir)
			if !k.IncludesCRD {
				if crds := d.crdComponent(s, nil, k); crds != "" {
					comp.DependsOn = []string{crds}
				}
			} else {
				d.note("%s includes ../crd: the CRDs are applied with it", k.Dir)
			}
			for _, i := range sortedKeys(images) {
				for _, b := range bindings[i] {
					if b.Kust == k && !placed[i] {
						comp.Images = append(comp.Images, *images[i])
						placed[i] = true
						d.note("image %s is named %s so the kustomized Deployment's reference is the image's and devloop pins it to the built digest: %s", images[i].Name, images[i].Name, b.Why)
					}
				}
			}
			d.Spec.Components = append(d.Spec.Components, comp)
		}
	}
	if len(charts) == 0 && len(s.Kustomizations) == 0 {
		d.tiltManifests(s, images, placed)
	}
	var rest []v1alpha1.ImageSpec
	for _, i := range sortedKeys(images) {
		if !placed[i] {
			rest = append(rest, *images[i])
		}
	}
	if len(rest) > 0 {
		d.Spec.Components = append(d.Spec.Components, v1alpha1.Component{Name: d.uniqueName("images"), Images: rest})
		d.note("component images: built and pushed only; nothing in the tree deploys them (add helm: or manifests:)")
	}
}

func chartBound(c *helmChart, bindings map[int][]binding) bool {
	for _, bs := range bindings {
		for _, b := range bs {
			if b.Chart == c {
				return true
			}
		}
	}
	return false
}

// crdComponent adds a manifests component of CRDs the chart (or
// kustomization) needs first, and returns its name ("" for none): the
// chart's and its vendored subcharts' crds/ (Helm installs them once and
// never upgrades them; applied server-side they follow every change), else
// config/crd/bases.
func (d *draft) crdComponent(s *treeScan, c *helmChart, k *kustomization) string {
	var paths []string
	switch {
	case c != nil && len(c.CRDDirs) > 0:
		paths = c.CRDDirs
	case len(s.CRDDirs) > 0:
		paths = s.CRDDirs
	default:
		return ""
	}
	name := "crds"
	if c != nil {
		name = dnsLabel(c.Name) + "-crds"
	}
	for _, comp := range d.Spec.Components {
		if applied, ok := comp.ManifestPaths(); ok && strings.Join(applied, ",") == strings.Join(paths, ",") {
			return comp.Name
		}
	}
	name = d.uniqueName(name)
	d.Spec.Components = append(d.Spec.Components, v1alpha1.Component{Name: name, Manifests: &v1alpha1.ManifestsSpec{Source: initSource, Paths: paths}})
	d.note("component %s: the CRDs in %s, applied server-side before what needs them", name, strings.Join(paths, ", "))
	return name
}

// maxImageValues is helm.imageValues' limit.
const maxImageValues = 8

// appendImageValues writes where chart c reads image img's reference, in
// the chart's own spelling, once per path, and only what is needed: where
// the image is (registry, repository or whole reference), its name when
// the chart's differs, and its tag only for a reference that reaches a
// custom resource. A reference rendered into a workload is pinned to the
// built digest by devloop whatever its tag, so a tag value would only
// spend the list's eight entries (Volcano has six images).
func appendImageValues(list []v1alpha1.ImageValue, img *v1alpha1.ImageSpec, b binding, c *helmChart) []v1alpha1.ImageValue {
	custom := c.reachesCustomResource(b.Image)
	add := func(p, from string) {
		if p == "" {
			return
		}
		for _, v := range list {
			if v.Path == p {
				return
			}
		}
		list = append(list, v1alpha1.ImageValue{Image: img.Name, Path: p, From: from})
	}
	tag := func() {
		if custom {
			add(b.Image.TagPath, "Revision")
		}
	}
	sameName := b.Image.Name == img.Name
	switch b.Image.Style {
	case styleRepository:
		add(join(b.Image.Path, "repository"), "Repository")
		tag()
	case styleSplit:
		add(join(b.Image.Path, "repository"), "Registry")
		if !sameName {
			add(join(b.Image.Path, "image"), "Name")
		}
		tag()
	case styleNameKey:
		add(b.Image.RegistryPath, "Registry")
		if !sameName {
			add(b.Image.Path, "Name")
		}
		tag()
	case styleReference:
		add(b.Image.Path, "Reference")
	}
	return list
}

// boundImageValues keeps a component's imageValues within the API's limit
// and says what it left out.
func (d *draft) boundImageValues(comp *v1alpha1.Component) {
	if len(comp.ImageValues()) <= maxImageValues {
		return
	}
	var left []string
	for _, v := range comp.Helm.ImageValues[maxImageValues:] {
		left = append(left, v.Path)
	}
	comp.Helm.ImageValues = comp.Helm.ImageValues[:maxImageValues]
	d.note("component %s: imageValues holds %d entries; not written (set them in values or valuesFrom): %s", comp.Name, maxImageValues, strings.Join(left, ", "))
}

func (d *draft) uniqueName(n string) string {
	name := n
	for i := 2; d.hasName(name); i++ {
		name = n + "-" + strconv.Itoa(i)
	}
	return name
}

func (d *draft) hasName(n string) bool {
	for _, c := range d.Spec.Components {
		if c.Name == n {
			return true
		}
	}
	for _, t := range d.Spec.Tests {
		if t.Name == n {
			return true
		}
	}
	return false
}

func sortedKeys(m map[int]*v1alpha1.ImageSpec) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	return keys
}

// tests adds a unit test suite per module, run on request, on the
// images' build cache claim (same source and builder image) so it starts
// warm.
func (d *draft) tests(s *treeScan, images map[int]*v1alpha1.ImageSpec) {
	built := map[*goModule]bool{}
	for i := range images {
		built[s.Mains[i].Module] = true
	}
	n := 0
	for _, m := range s.Modules {
		// A module nothing is built from (a staging API module) is tested
		// by its own project, not by this loop.
		if n == 2 || !built[m] && m.Dir != "." {
			continue
		}
		n++
		name := "unit-tests"
		if n > 1 {
			name = d.uniqueName(dnsLabel(path.Base(m.Path)) + "-unit-tests")
		}
		cmd := []string{"go", "test", "./..."}
		if m.Dir != "." {
			cmd = []string{"go", "-C", m.Dir, "test", "./..."}
		}
		d.Spec.Tests = append(d.Spec.Tests, v1alpha1.TestSuite{
			Name: name, Labels: []string{"unit"}, Image: v1alpha1.TestImage{Ref: builderImage(m)},
			Source: initSource, Command: cmd, Cache: &v1alpha1.TestCache{},
		})
		d.note("suite %s: `%s` on request (kubectl devloop trigger %s %s), sharing the images' build cache", name, strings.Join(cmd, " "), d.Name, name)
	}
}

// hints are what init read but did not turn into fields.
func (d *draft) hints(s *treeScan, bindings map[int][]binding) {
	for _, c := range s.Charts {
		var left []string
		for _, img := range c.Images {
			if !boundImage(bindings, c, img) && chartBound(c, bindings) {
				left = append(left, img.Path)
			}
		}
		if len(left) > 0 {
			d.note("chart %s: the images of %s are left as the chart has them (no binary of this tree builds them)", c.Dir, strings.Join(left, ", "))
		}
	}
	if t := s.Tilt; t != nil {
		if len(t.Images) > 0 {
			d.note("Tiltfile builds %s", strings.Join(t.Images, ", "))
		}
		if len(t.YAML) > 0 {
			d.note("Tiltfile deploys %s", strings.Join(t.YAML, ", "))
		}
		if len(t.Resources) > 0 {
			d.note("Tiltfile resources %s", strings.Join(t.Resources, ", "))
		}
		if t.LiveSync && !d.liveUpdates() {
			d.note("Tiltfile live-updates with sync() into %s: set images[].liveUpdate.paths to the binary's path in the image for the same loop", strings.Join(t.SyncTo, ", "))
		}
	}
}

func boundImage(bindings map[int][]binding, c *helmChart, img chartImage) bool {
	for _, bs := range bindings {
		for _, b := range bs {
			if b.Chart == c && b.Image.Path == img.Path {
				return true
			}
		}
	}
	return false
}

// tiltManifests deploys the YAML a Tiltfile's k8s_yaml names, when the tree
// has no chart or kustomization, with the images in the same component:
// named as the Tiltfile builds them, the manifests' references are the
// images' bare names, which devloop pins to the built digests.
func (d *draft) tiltManifests(s *treeScan, images map[int]*v1alpha1.ImageSpec, placed map[int]bool) {
	if s.Tilt == nil {
		return
	}
	var paths []string
	for _, y := range s.Tilt.YAML {
		p := path.Clean(strings.TrimPrefix(y, "./"))
		if len(paths) < 8 && !strings.HasPrefix(p, "..") && fileExists(filepath.Join(s.Root, filepath.FromSlash(p))) {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 {
		return
	}
	comp := v1alpha1.Component{Name: d.uniqueName("app"), Manifests: &v1alpha1.ManifestsSpec{Source: initSource, Paths: paths}}
	for _, i := range sortedKeys(images) {
		if !placed[i] {
			comp.Images = append(comp.Images, *images[i])
			placed[i] = true
		}
	}
	d.Spec.Components = append(d.Spec.Components, comp)
	d.note("component %s: the YAML the Tiltfile's k8s_yaml applies (%s), applied server-side", comp.Name, strings.Join(paths, ", "))
}

func (d *draft) liveUpdates() bool {
	for _, c := range d.Spec.Components {
		for _, i := range c.Images {
			if i.LiveUpdate != nil {
				return true
			}
		}
	}
	return false
}
