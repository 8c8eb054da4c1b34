package cli

import (
	"bufio"
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// dockerfile is what init reads of a Dockerfile (never built, never run):
// its last stage's base and ENTRYPOINT, the binaries it copies from a build
// stage, and the files it copies from the build context.
type dockerfile struct {
	Path       string // relative to the tree
	Base       string // FROM of the last stage
	Entrypoint []string
	// Built are the binaries the last stage copies from another stage
	// (COPY --from=builder /workspace/manager /manager): base name of the
	// source → where it lands.
	Built map[string]string
	// Context are the files the last stage copies from the build context:
	// source path → destination.
	Context [][2]string
	// Runs are the RUN lines of all stages (go build, make targets).
	Runs []string
	// FinalRuns counts the RUN lines of the last stage: what it installs
	// beside the binary.
	FinalRuns int
	// StageCopies are the last stage's copies from a build stage that
	// copied the build context into its WORKDIR (COPY . .), by the path
	// under that WORKDIR: files of the source the build stage only
	// carried over (Dynamo's /workspace/config/crd/bases/ into
	// /opt/dynamo-operator/crds/). Source path → destination.
	StageCopies [][2]string
}

// buildStage is what readDockerfile keeps of a stage the last one copies
// from: its WORKDIR and whether it copied the build context into it.
type buildStage struct {
	workdir      string
	copiesSource bool
}

// readDockerfile reads the instructions init uses as hints. Continuation
// lines are joined; ARG substitutions are not made.
func readDockerfile(file, rel string) (*dockerfile, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	d := &dockerfile{Path: rel}
	var lines []string
	sc := bufio.NewScanner(f)
	cur := ""
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasSuffix(l, "\\") {
			cur += strings.TrimSuffix(l, "\\") + " "
			continue
		}
		lines = append(lines, cur+l)
		cur = ""
	}
	stages := map[string]*buildStage{}
	stage := &buildStage{workdir: "/"}
	for _, l := range lines {
		fields := strings.Fields(l)
		if len(fields) == 0 {
			continue
		}
		switch strings.ToUpper(fields[0]) {
		case "FROM":
			// A new stage: only the last one's copies and entrypoint count.
			if len(fields) > 1 {
				d.Base = fields[1]
			}
			d.Built, d.Context, d.Entrypoint, d.FinalRuns, d.StageCopies = map[string]string{}, nil, nil, 0, nil
			stage = &buildStage{workdir: "/"}
			if len(fields) > 3 && strings.EqualFold(fields[2], "AS") {
				stages[fields[3]] = stage
			}
			// A stage built FROM another starts where that one ended.
			if len(fields) > 1 {
				if from, ok := stages[fields[1]]; ok && from != stage {
					*stage = *from
				}
			}
		case "WORKDIR":
			if len(fields) > 1 {
				stage.workdir = path.Join(stage.workdir, fields[1])
			}
		case "ENTRYPOINT":
			d.Entrypoint = execForm(strings.TrimSpace(l[len(fields[0]):]))
		case "RUN":
			d.Runs = append(d.Runs, strings.TrimSpace(l[len(fields[0]):]))
			d.FinalRuns++
		case "COPY", "ADD":
			from, args := "", []string{}
			for _, a := range fields[1:] {
				if v, ok := strings.CutPrefix(a, "--from="); ok {
					from = v
				} else if !strings.HasPrefix(a, "--") {
					args = append(args, a)
				}
			}
			if len(args) < 2 {
				continue
			}
			src, dst := args[0], args[len(args)-1]
			if from == "" && len(args) == 2 && path.Clean(src) == "." {
				stage.copiesSource = stage.copiesSource || path.Join(stage.workdir, dst) == stage.workdir
			}
			if st := stages[from]; st != nil && st.copiesSource && path.IsAbs(src) {
				if rel, ok := strings.CutPrefix(path.Clean(src), strings.TrimSuffix(st.workdir, "/")+"/"); ok {
					d.StageCopies = append(d.StageCopies, [2]string{rel, dst})
				}
			}
			if from != "" {
				to := dst
				// Into a directory: a trailing slash, ".", or a file
				// with an extension copied to a path without one.
				if strings.HasSuffix(dst, "/") || dst == "." || path.Ext(dst) == "" && path.Ext(src) != "" {
					to = path.Join("/", dst, path.Base(src))
				}
				d.Built[path.Base(src)] = to
			} else if len(args) == 2 {
				d.Context = append(d.Context, [2]string{strings.TrimPrefix(path.Clean(src), "./"), dst})
			}
		}
	}
	return d, sc.Err()
}

// execForm reads ENTRYPOINT ["/manager", "--flag"]; a shell form is kept
// as one word list.
func execForm(s string) []string {
	var list []string
	if json.Unmarshal([]byte(s), &list) == nil {
		return list
	}
	return strings.Fields(s)
}

// belongsTo says whether the Dockerfile is main m's own: it sits in the
// main's directory, in a directory named after it
// (installer/dockerfile/scheduler/Dockerfile), or is named after it
// (build/Dockerfile.placement).
func (d *dockerfile) belongsTo(m goMain) bool {
	dir, file := path.Dir(d.Path), path.Base(d.Path)
	return dir == m.Dir || path.Base(dir) == m.Name || file == "Dockerfile."+m.Name || file == m.Name+".Dockerfile"
}

// binaryTarget is where a Dockerfile puts binary b of the tree in its
// image: the path it copies a file named b, one of the image's aliases
// (its name in a chart) or the Dockerfile's own `go build -o X` output to,
// or, in the main's own Dockerfile, a file whose name contains the main's
// (validator -> nvidia-validator); "" when the Dockerfile does not ship it.
func (d *dockerfile) binaryTarget(m goMain, aliases ...string) string {
	names := append([]string{m.Binary, m.Name}, aliases...)
	for _, b := range d.goBuilds() {
		if buildsPackage(b, m) {
			if o := outputOf(b); o != "" {
				names = append(names, path.Base(o))
			}
		}
	}
	for _, n := range names {
		if to, ok := d.Built[n]; ok {
			return to
		}
	}
	if d.belongsTo(m) {
		bases := make([]string, 0, len(d.Built))
		for base := range d.Built {
			bases = append(bases, base)
		}
		sort.Strings(bases) // the same answer on every run
		for _, base := range bases {
			if path.Ext(base) == "" && strings.Contains(base, m.Name) {
				return d.Built[base]
			}
		}
	}
	return ""
}

// builtFiles are the other files the main's own Dockerfile copies from a
// build stage that are files of the main's directory (the validator's
// workload manifests): source path → destination.
func (d *dockerfile) builtFiles(root string, m goMain, target string) [][2]string {
	var out [][2]string
	if !d.belongsTo(m) {
		return nil
	}
	outputs := d.goBuildOutputs()
	for base, to := range d.Built {
		src := path.Join(m.Dir, base)
		// A binary the Dockerfile builds is no file of the source, even
		// where a directory has its name (Dynamo's crd-apply, built from
		// cmd/crd-apply): builtTarget ships it.
		if to != target && !outputs[base] && fileExists(filepath.Join(root, filepath.FromSlash(src))) {
			out = append(out, [2]string{src, to})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// shellEntrypoint says whether the image starts a shell: the pods run
// shell commands, which a distroless base cannot.
func (d *dockerfile) shellEntrypoint() bool {
	return len(d.Entrypoint) > 0 && (path.Base(d.Entrypoint[0]) == "sh" || path.Base(d.Entrypoint[0]) == "bash")
}

// buildsPackage says whether a RUN line builds main m (go build ./cmd/x,
// go build -o manager cmd/main.go, go build -o manager .).
func buildsPackage(run string, m goMain) bool {
	inMod := strings.TrimPrefix(m.Pkg, "./")
	for _, f := range strings.Fields(run) {
		f = strings.TrimSuffix(strings.TrimPrefix(f, "./"), "/")
		if f == inMod || path.Dir(f) == inMod && strings.HasSuffix(f, ".go") {
			return true
		}
	}
	return false
}

// outputOf is the -o of a go build line.
func outputOf(run string) string {
	f := strings.Fields(run)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "-o" {
			return f[i+1]
		}
	}
	return ""
}

// goBuilds are the Dockerfile's go build commands: each command of a RUN
// line joined by && or ; apart (Dynamo builds its manager and crd-apply in
// one RUN), so each output is read with its own packages.
func (d *dockerfile) goBuilds() []string {
	var out []string
	for _, r := range d.Runs {
		for _, and := range strings.Split(r, "&&") {
			for _, c := range strings.Split(and, ";") {
				if strings.Contains(c, "go build") {
					out = append(out, strings.TrimSpace(c))
				}
			}
		}
	}
	return out
}

// goBuildOutputs are the base names of the Dockerfile's go build outputs.
func (d *dockerfile) goBuildOutputs() map[string]bool {
	out := map[string]bool{}
	for _, b := range d.goBuilds() {
		if o := outputOf(b); o != "" {
			out[path.Base(o)] = true
		}
	}
	return out
}

// builtTarget is where the last stage puts what a go build of main m in
// this Dockerfile writes, "" when it builds no m or ships none: a second
// binary of an image (Dynamo's crd-apply beside its manager).
func (d *dockerfile) builtTarget(m goMain) string {
	for _, b := range d.goBuilds() {
		if !buildsPackage(b, m) {
			continue
		}
		if o := outputOf(b); o != "" {
			if to, ok := d.Built[path.Base(o)]; ok {
				return to
			}
		}
	}
	return ""
}

// sourcePath is p, a path the Dockerfile copies from its build context, as
// a path of the tree: the context is the tree's root (GPU Operator builds
// docker/Dockerfile from the root) or the Dockerfile's directory (Dynamo
// builds deploy/operator/Dockerfile there). "" when neither holds it, or
// p is a pattern.
func (d *dockerfile) sourcePath(root, p string) string {
	if strings.ContainsAny(p, "*?$") {
		return ""
	}
	p = strings.TrimPrefix(path.Clean(p), "./")
	for _, c := range []string{p, path.Join(path.Dir(d.Path), p)} {
		if !strings.HasPrefix(c, "..") && fileExists(filepath.Join(root, filepath.FromSlash(c))) {
			return c
		}
	}
	return ""
}

// stageSourceCopies are StageCopies but the binaries the Dockerfile's go
// builds write (a binary is no file of the source, even where one has its
// name).
func (d *dockerfile) stageSourceCopies() [][2]string {
	outputs := d.goBuildOutputs()
	var out [][2]string
	for _, c := range d.StageCopies {
		if !outputs[strings.TrimSuffix(c[0], "/")] {
			out = append(out, c)
		}
	}
	return out
}
