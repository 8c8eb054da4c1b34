package plan

import (
	"bytes"
	"fmt"
	"path"
	"strings"
	"text/template"
	"text/template/parse"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// RunValues are the variables of a run step's command and env templates.
// They mean what the tag templates' variables mean (TagValues), without
// the content hash, which only the build gives.
type RunValues struct {
	// Revision is the source revision, as tags render it; ShortRevision
	// its first 12 characters.
	Revision, ShortRevision string
	// Source, Image and Component are the names in the spec; Image keeps
	// its '/'.
	Source, Image, Component string
	// ImageBase is the last path segment of Image: one run spec serves
	// several images (make {{ .ImageBase }}).
	ImageBase string
}

// RunValuesOf are the run template values of an image whose tags render
// from v.
func RunValuesOf(v TagValues) RunValues {
	return RunValues{
		Revision: v.Revision, ShortRevision: v.ShortRevision,
		Source: v.Source, Image: v.Image, Component: v.Component, ImageBase: path.Base(v.Image),
	}
}

// BuiltImage is an image built by another component, as a run template
// reads it: {{ (image "operator").Reference }}.
type BuiltImage struct {
	// Reference is repository@digest, as nodes pull it.
	Reference string
	// Repository is where nodes pull it from (under registry.pullPrefix
	// when the spec sets one).
	Repository string
	// Digest is "sha256:<hex>".
	Digest string
	// Tag is the content tag.
	Tag string
}

// ImageLookup returns the built image a template names.
type ImageLookup func(name string) (BuiltImage, error)

// imageFunc is the template function reading another component's image.
const imageFunc = "image"

// parseRunTemplate parses one command item or env value. The image
// function is a placeholder here; execution binds the real lookup.
func parseRunTemplate(text string) (*template.Template, error) {
	return template.New("run").Option("missingkey=error").
		Funcs(template.FuncMap{imageFunc: func(string) (BuiltImage, error) { return BuiltImage{}, nil }}).
		Parse(text)
}

// isTemplate reports whether text has template actions; text without
// any is used as written, unparsed.
func isTemplate(text string) bool { return strings.Contains(text, "{{") }

// TemplateImages are the images a run template reads with image "<name>",
// each once, in order of first use. The name must be a quoted literal, so
// the plan knows a component's dependencies without rendering anything.
func TemplateImages(text string) ([]string, error) {
	if !isTemplate(text) {
		return nil, nil
	}
	t, err := parseRunTemplate(text)
	if err != nil {
		return nil, err
	}
	var names []string
	seen := map[string]bool{}
	visit := func(cmd *parse.CommandNode) error {
		if id, ok := cmd.Args[0].(*parse.IdentifierNode); !ok || id.Ident != imageFunc {
			return nil
		}
		var lit *parse.StringNode
		if len(cmd.Args) == 2 {
			lit, _ = cmd.Args[1].(*parse.StringNode)
		}
		if lit == nil {
			return fmt.Errorf("%s takes one quoted image name, e.g. {{ (image \"operator\").Digest }}, not %q", imageFunc, cmd.String())
		}
		if !seen[lit.Text] {
			seen[lit.Text] = true
			names = append(names, lit.Text)
		}
		return nil
	}
	for _, tt := range t.Templates() {
		if tt.Tree == nil {
			continue
		}
		if err := walkCommands(tt.Tree.Root, visit); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// walkCommands calls visit for every command of a parse tree, in every
// branch, executed or not.
func walkCommands(n parse.Node, visit func(*parse.CommandNode) error) error {
	var children []parse.Node
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		children = n.Nodes
	case *parse.ActionNode:
		children = []parse.Node{n.Pipe}
	case *parse.PipeNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Cmds {
			children = append(children, c)
		}
	case *parse.CommandNode:
		if err := visit(n); err != nil {
			return err
		}
		children = n.Args
	case *parse.ChainNode:
		children = []parse.Node{n.Node}
	case *parse.IfNode:
		children = []parse.Node{n.Pipe, n.List, n.ElseList}
	case *parse.RangeNode:
		children = []parse.Node{n.Pipe, n.List, n.ElseList}
	case *parse.WithNode:
		children = []parse.Node{n.Pipe, n.List, n.ElseList}
	case *parse.TemplateNode:
		children = []parse.Node{n.Pipe}
	}
	for _, c := range children {
		if err := walkCommands(c, visit); err != nil {
			return err
		}
	}
	return nil
}

// RunImages are the images the templates of a run step read, each once.
func RunImages(run *v1alpha1.BuildRun) ([]string, error) {
	var names []string
	seen := map[string]bool{}
	for _, f := range runTemplates(run) {
		got, err := TemplateImages(f.text)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.path(field.NewPath("run")), err)
		}
		for _, n := range got {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	return names, nil
}

// runTemplate is one templated field of a run step: command[index], or
// env[index].value.
type runTemplate struct {
	env   bool
	index int
	text  string
}

// path is the field under run.
func (f runTemplate) path(run *field.Path) *field.Path {
	if f.env {
		return run.Child("env").Index(f.index).Child("value")
	}
	return run.Child("command").Index(f.index)
}

func runTemplates(run *v1alpha1.BuildRun) []runTemplate {
	var out []runTemplate
	for i, c := range run.Command {
		out = append(out, runTemplate{index: i, text: c})
	}
	for i, e := range run.Env {
		out = append(out, runTemplate{env: true, index: i, text: e.Value})
	}
	return out
}

// renderRunTemplate renders one command item or env value.
func renderRunTemplate(text string, v RunValues, images ImageLookup) (string, error) {
	if !isTemplate(text) {
		return text, nil
	}
	t, err := parseRunTemplate(text)
	if err != nil {
		return "", err
	}
	if images == nil {
		images = func(name string) (BuiltImage, error) {
			return BuiltImage{}, fmt.Errorf("no image %q here", name)
		}
	}
	t.Funcs(template.FuncMap{imageFunc: images})
	var buf bytes.Buffer
	if err := t.Execute(&buf, v); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// RenderRun returns a copy of run with every command item and env value
// rendered; run itself is not changed. An error names the field, relative
// to run ("run.env[1].value: ...").
func RenderRun(run *v1alpha1.BuildRun, v RunValues, images ImageLookup) (*v1alpha1.BuildRun, error) {
	out := run.DeepCopy()
	for _, f := range runTemplates(run) {
		r, err := renderRunTemplate(f.text, v, images)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.path(field.NewPath("run")), err)
		}
		if f.env {
			out.Env[f.index].Value = r
		} else {
			out.Command[f.index] = r
		}
	}
	return out, nil
}

// exampleRunValues are values of the longest length each variable can
// have, for checking templates at plan time.
func exampleRunValues(component, image, source string) RunValues {
	return RunValuesOf(TagValues{
		Revision: strings.Repeat("b", 64), ShortRevision: strings.Repeat("c", 12),
		Source: source, Image: image, Component: component,
	})
}

// exampleImage stands in for every image a template may read at plan
// time.
var exampleImage = BuiltImage{
	Reference:  "registry.example/prefix/image@sha256:" + strings.Repeat("d", 64),
	Repository: "registry.example/prefix/image",
	Digest:     "sha256:" + strings.Repeat("d", 64),
	Tag:        strings.Repeat("e", 64),
}

// checkRunTemplate parses and renders one template with example values:
// an unknown variable, field or function fails here, at plan time, not in
// a build.
func checkRunTemplate(text string, v RunValues) error {
	_, err := renderRunTemplate(text, v, func(string) (BuiltImage, error) { return exampleImage, nil })
	return err
}
