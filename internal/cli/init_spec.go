package cli

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// draft is the DevEnvironment init writes and what it says about it.
type draft struct {
	Name  string
	Spec  v1alpha1.DevEnvironmentSpec
	Notes []string // what was guessed and why, one line each
}

func (d *draft) note(format string, args ...any) {
	d.Notes = append(d.Notes, fmt.Sprintf(format, args...))
}

// initOptions are init's flags.
type initOptions struct {
	Name     string
	Registry string
}

const (
	initSource    = "src"
	initBase      = "gcr.io/distroless/static:nonroot"
	maxInitLayers = 8 // images[].layers' limit
)

var imageNameRE = regexp.MustCompile(`^[a-z0-9]+([._-]+[a-z0-9]+)*(/[a-z0-9]+([._-]+[a-z0-9]+)*)*$`)

// dnsLabel makes s a DNS-1123 label (component and release names).
func dnsLabel(s string) string {
	s = strings.ToLower(s)
	s = regexp.MustCompile(`[^a-z0-9-]+`).ReplaceAllString(s, "-")
	s = strings.Trim(s, "-")
	if len(s) > 40 {
		s = strings.Trim(s[:40], "-")
	}
	if s == "" {
		return "app"
	}
	return s
}

// draftEnvironment turns what init read into a DevEnvironment.
func draftEnvironment(s *treeScan, o initOptions) *draft {
	d := &draft{Name: o.Name}
	if d.Name == "" {
		abs, _ := filepath.Abs(s.Root)
		d.Name = dnsLabel(filepath.Base(abs))
	}
	registry := o.Registry
	if registry == "" {
		registry = "localhost:5000/" + d.Name
	}
	insecure := strings.HasPrefix(registry, "localhost") || strings.HasPrefix(registry, "127.")
	d.Spec.Registry = &v1alpha1.RegistrySpec{Prefix: registry, Insecure: insecure}
	d.Spec.Sources = []v1alpha1.Source{{Name: initSource, OCI: &v1alpha1.OCISource{Repository: registry + "/src", Tag: "dev", Insecure: insecure}}}
	d.note("source %s: what `kubectl devloop push . --env %s --source %s` pushes from this tree (use git: for a repository instead)", initSource, d.Name, initSource)
	if insecure {
		d.note("registry %s over plain HTTP (a local registry); set --registry for yours", registry)
	}
	for _, m := range s.Modules {
		d.note("%s: module %s, go %s -> builder image %s", path.Join(m.Dir, "go.mod"), m.Path, m.GoVersion, builderImage(m))
	}
	if len(s.Mains) > 0 {
		d.note("images are static Go binaries (CGO_ENABLED=0) on %s; set base where the binary needs more", initBase)
	}

	bindings := bindMains(s)
	images := d.images(s, bindings)
	d.components(s, bindings, images)
	d.tests(s, images)
	d.hints(s, bindings)
	return d
}

func builderImage(m *goModule) string {
	if m.GoVersion == "" {
		return "golang"
	}
	return "golang:" + m.GoVersion
}

// images makes one image per main a chart or kustomization deploys (every
// main when nothing deploys any), indexed like s.Mains.
func (d *draft) images(s *treeScan, bindings map[int][]binding) map[int]*v1alpha1.ImageSpec {
	deployed := len(bindings) > 0
	var chosen []int
	var skipped []string
	for i := range s.Mains {
		if _, ok := bindings[i]; ok || !deployed {
			chosen = append(chosen, i)
		} else {
			skipped = append(skipped, s.Mains[i].Dir)
		}
	}
	if len(skipped) > 0 {
		d.note("not built, as no chart value or kustomization names their images (add an image if you deploy one): %s", strings.Join(skipped, ", "))
	}
	if len(chosen) > 16 {
		d.note("%d binaries; the first 16 are built (an environment holds at most 16 images)", len(chosen))
		chosen = chosen[:16]
	}
	// One run step per module, the same for each of its images: the
	// images share one build cache claim, so their builds take turns and
	// the second compiles nothing the first already did.
	// Where each image's binary goes, and the other binaries of its
	// module its Dockerfile builds and ships beside it: they join the
	// module's run step.
	ships := map[int]shipping{}
	extra := map[*goModule][]string{}
	for _, i := range chosen {
		sh := shippingOf(s, s.Mains[i], aliases(bindings[i]))
		ships[i] = sh
		for _, c := range sh.companions {
			extra[c.main.Module] = append(extra[c.main.Module], c.main.Pkg)
		}
	}
	runs := map[*goModule]*v1alpha1.BuildRun{}
	for _, i := range chosen {
		m := s.Mains[i].Module
		if runs[m] == nil {
			runs[m] = d.runStep(s, m, chosen, extra[m])
		}
	}
	out := map[int]*v1alpha1.ImageSpec{}
	used := map[string]bool{}
	usedDockerfiles := map[*dockerfile]bool{}
	defer func() {
		var unused []string
		for _, f := range s.Dockerfiles {
			if !usedDockerfiles[f] {
				unused = append(unused, f.Path)
			}
		}
		if len(unused) > 0 && len(unused) <= 8 {
			d.note("Dockerfiles that ship none of these images, not used (an OLM bundle or catalog, a test or tool image: add a run step for them): %s", strings.Join(unused, ", "))
		} else if len(unused) > 8 {
			d.note("%d Dockerfiles ship none of these images and are not used", len(unused))
		}
	}()
	for _, i := range chosen {
		m := s.Mains[i]
		name := imageName(m, bindings[i], used)
		img := &v1alpha1.ImageSpec{Name: name, Source: initSource, Base: initBase, Run: runs[m.Module].DeepCopy()}
		from := path.Join(m.Module.Dir, "out", m.Binary)
		to, df := ships[i].to, ships[i].df
		if df != nil {
			usedDockerfiles[df] = true
		}
		img.Layers = []v1alpha1.LayerMapping{{From: from, To: to, Mode: "0755"}}
		img.Entrypoint = []string{to}
		for _, c := range ships[i].companions {
			img.Layers = append(img.Layers, v1alpha1.LayerMapping{From: path.Join(c.main.Module.Dir, "out", c.main.Binary), To: c.to, Mode: "0755"})
			d.note("image %s: binary %s at %s too, as %s builds and ships it beside %s", name, c.main.Binary, c.to, df.Path, m.Binary)
		}
		if df != nil {
			d.note("image %s: binary %s at %s, as %s ships it", name, m.Binary, to, df.Path)
			if len(df.Entrypoint) > 0 && df.Entrypoint[0] == to && len(df.Entrypoint) > 1 {
				img.Entrypoint = df.Entrypoint
			}
			for _, f := range df.builtFiles(s.Root, m, to) {
				if len(img.Layers) < maxInitLayers {
					img.Layers = append(img.Layers, v1alpha1.LayerMapping{From: f[0], To: f[1]})
				}
			}
			d.contextLayers(s, img, df, df.Context)
			d.contextLayers(s, img, df, df.stageSourceCopies())
			d.baseFromDockerfile(s, img, df)
		} else {
			d.note("image %s: binary %s of %s at %s (no Dockerfile ships it)", name, m.Binary, m.Dir, to)
		}
		if s.Tilt != nil && contains(s.Tilt.SyncTo, to) {
			img.LiveUpdate = &v1alpha1.LiveUpdate{Paths: []string{to}}
			d.note("image %s: live update of %s, as the Tiltfile's sync() does: a new binary is put into the running pods and the process restarted, no rollout", name, to)
		}
		for _, b := range bindings[i] {
			if b.Chart != nil && b.Chart.reachesCustomResource(b.Image) {
				img.Tags = []string{"{{ .ContentHash }}", "{{ .ShortRevision }}"}
				d.note("image %s is also pushed under the source revision tag: chart value %s reaches a custom resource, from which the operator starts pods by tag", name, b.Image.Path)
				break
			}
		}
		out[i] = img
	}
	return out
}

// baseFromDockerfile keeps the Dockerfile's runtime base where the image's
// pods run shell commands, which a distroless base cannot: its ENTRYPOINT
// is a shell, or it ships a shell script (Volcano's webhook-manager ships
// gen-admission-secret.sh, which the chart's pre-install hook runs from
// that image: on distroless the hook fails before the release exists).
func (d *draft) baseFromDockerfile(s *treeScan, img *v1alpha1.ImageSpec, df *dockerfile) {
	script := shippedScript(s.Root, img.Layers)
	var why string
	switch {
	case df.shellEntrypoint():
		why = "its ENTRYPOINT is a shell, so its pods run shell commands a distroless base cannot"
	case script != "":
		why = "the image ships a shell script (" + script + "), which its pods or a chart hook run and a distroless base cannot"
	}
	if why == "" || strings.Contains(df.Base, "$") {
		if df.FinalRuns > 0 {
			d.note("image %s: %s also runs commands in its runtime stage (packages, tools) on %s: if the binary or its pods need them, use such a base", img.Name, df.Path, df.Base)
		}
		return
	}
	img.Base = df.Base
	d.note("image %s: base %s as %s has it: %s", img.Name, df.Base, df.Path, why)
	if df.FinalRuns > 0 && script != "" {
		d.note("image %s: %s's runtime stage also installs what the script calls (its RUN lines): build that stage once, push it and name it as the base", img.Name, df.Path)
	}
}

// shellShebang matches #!/bin/sh, #!/bin/bash, #!/usr/bin/env bash.
var shellShebang = regexp.MustCompile(`^#!\s*\S*/(env\s+)?(ba|da|z)?sh(\s|$)`)

// shippedScript is where the first layer that is a shell script (a file
// starting with #! naming sh or bash) lands in the image, or "".
func shippedScript(root string, layers []v1alpha1.LayerMapping) string {
	for _, l := range layers {
		f, err := os.Open(filepath.Join(root, filepath.FromSlash(l.From)))
		if err != nil {
			continue
		}
		line, _ := bufio.NewReader(io.LimitReader(f, 256)).ReadString('\n')
		f.Close()
		if shellShebang.MatchString(line) {
			return l.To
		}
	}
	return ""
}

// runStep is the one compile of a module's images: go build of every
// main that becomes an image into out/, as -o with a directory names each
// binary after its package.
func (d *draft) runStep(s *treeScan, m *goModule, chosen []int, extra []string) *v1alpha1.BuildRun {
	cmd := []string{"go"}
	if m.Dir != "." {
		cmd = append(cmd, "-C", m.Dir)
	}
	cmd = append(cmd, "build", "-o", "out/")
	var pkgs []string
	allCmd := true
	for _, i := range chosen {
		if s.Mains[i].Module == m {
			pkgs = append(pkgs, s.Mains[i].Pkg)
			allCmd = allCmd && strings.HasPrefix(s.Mains[i].Pkg, "./cmd/")
		}
	}
	for _, p := range extra {
		if !slices.Contains(pkgs, p) {
			pkgs = append(pkgs, p)
			allCmd = allCmd && strings.HasPrefix(p, "./cmd/")
		}
	}
	if len(cmd)+len(pkgs) > 8 { // run.command holds 8 items
		pkgs = []string{"./..."}
		if allCmd {
			pkgs = []string{"./cmd/..."}
		}
	}
	cmd = append(cmd, pkgs...)
	d.note("one run step for the images of module %s: `%s`, so they share one build cache claim and compile once", m.Path, strings.Join(cmd, " "))
	return &v1alpha1.BuildRun{
		Image:   builderImage(m),
		Command: cmd,
		Env:     []v1alpha1.EnvVar{{Name: "CGO_ENABLED", Value: "0"}, {Name: "GOFLAGS", Value: "-trimpath"}},
		Cache:   &v1alpha1.BuildCache{},
	}
}

// contextLayers adds what a Dockerfile's last stage copies from the
// source (GPU Operator's assets and manifests) as layers, when the path is
// in the tree.
func (d *draft) contextLayers(s *treeScan, img *v1alpha1.ImageSpec, df *dockerfile, copies [][2]string) {
	for _, c := range copies {
		from, to := df.sourcePath(s.Root, c[0]), c[1]
		if from == "" {
			continue
		}
		if len(img.Layers) == maxInitLayers {
			d.note("image %s: more files copied by %s than layers allow; %s left out", img.Name, df.Path, from)
			continue
		}
		if strings.HasSuffix(to, "/") {
			if fi, err := os.Stat(filepath.Join(s.Root, filepath.FromSlash(from))); err == nil && !fi.IsDir() {
				to = path.Join(to, path.Base(from))
			}
		}
		img.Layers = append(img.Layers, v1alpha1.LayerMapping{From: from, To: path.Clean(to)})
	}
}

// aliases are the names the chart or kustomization gives main's image.
func aliases(bs []binding) []string {
	var out []string
	for _, b := range bs {
		if b.Chart != nil {
			out = append(out, b.Image.shortName())
		}
	}
	return out
}

// imageName names an image as the deployment names it, so references are
// recognisable: the chart's image name (with its path when the chart
// writes registry and name apart), the kustomized repository (so the
// rendered reference is the image's bare name and devloop pins it), or
// the binary's name.
func imageName(m goMain, bs []binding, used map[string]bool) string {
	name := normal(m.Name)
	for _, b := range bs {
		switch {
		case b.Kust != nil && b.Kust.Image != "":
			name = strings.ToLower(b.Kust.Image)
		case b.TiltRef != "":
			name = strings.ToLower(withoutTag(b.TiltRef))
		case b.Chart != nil && b.Image.Style == styleNameKey:
			name = b.Image.Name
		case b.Chart != nil && b.Image.Name != "":
			name = b.Image.shortName()
		default:
			continue
		}
		break
	}
	if !imageNameRE.MatchString(name) || len(name) > 60 {
		name = dnsLabel(m.Name)
	}
	base := name
	for n := 2; used[name]; n++ {
		name = fmt.Sprintf("%s-%d", base, n)
	}
	used[name] = true
	return name
}

// shipping is where a Dockerfile puts an image's binary, and the other
// binaries of its module it builds and ships beside it.
type shipping struct {
	to         string
	df         *dockerfile
	companions []companion
}

// companion is a second binary of an image: main's output at to.
type companion struct {
	main goMain
	to   string
}

// shippingOf finds the Dockerfile that ships main m (its own before any
// other that copies a binary of its name) and what else it ships.
func shippingOf(s *treeScan, m goMain, aliases []string) shipping {
	sh := shipping{to: "/" + m.Name}
	for _, f := range s.Dockerfiles {
		if t := f.binaryTarget(m, aliases...); t != "" && (sh.df == nil || f.belongsTo(m)) {
			sh.to, sh.df = t, f
		}
	}
	if sh.df == nil {
		return sh
	}
	for _, c := range s.Mains {
		if c.Module != m.Module || c.Pkg == m.Pkg {
			continue
		}
		if to := sh.df.builtTarget(c); to != "" && to != sh.to {
			sh.companions = append(sh.companions, companion{main: c, to: to})
		}
	}
	return sh
}
