package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/plan"
)

// newInitCommand is `kubectl devloop init [DIR]`: a first DevEnvironment
// from what a tree holds. It needs no cluster.
func newInitCommand(a *app) *cobra.Command {
	var o initOptions
	var out string
	cmd := &cobra.Command{
		Use:   "init [DIR]",
		Short: "Write a first DevEnvironment for a source tree (go.mod, mains, Dockerfiles, charts, kustomizations)",
		Long: `Read a tree (the current directory by default) and write a first
DevEnvironment for it, with comments saying what was guessed and why; edit it,
then kubectl apply it. Nothing in the tree is built or run, and the cluster is
not contacted.

It reads go.mod (module, Go version: the builder image golang:<version>), every
package main but tools, tests and examples (one image per binary a chart or
kustomization deploys, all built by one run step per module so they share one
build cache and compile once; a distroless static base), Dockerfiles (where
they put each binary, their ENTRYPOINT and the files they copy from the source;
never built), Helm charts (the image references in values.yaml, in the chart's
own spelling, become helm.imageValues; a reference that reaches a custom
resource gets the source revision tag), CRD directories (a manifests component
the chart depends on), config/default kustomizations (a manifests component
when there is no chart) and a Tiltfile (the images and resources it names, as
comments; never evaluated).`,
		Example: `  kubectl devloop init > devenv.yaml
  kubectl devloop init ../gpu-operator --name gpu --registry registry.example.com/team -o devenv.yaml`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			data, err := initEnvironment(dir, o)
			if err != nil {
				return err
			}
			if out == "" || out == "-" {
				_, err = a.out().Write(data)
				return err
			}
			if err := os.WriteFile(out, data, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(a.errOut(), "wrote %s: edit it, then kubectl apply -f %s\n", out, out)
			return nil
		},
	}
	cmd.Flags().StringVar(&o.Name, "name", "", "the environment's name (default: the directory's name)")
	cmd.Flags().StringVar(&o.Registry, "registry", "", "registry.prefix, where images and the pushed source go (default: localhost:5000/NAME)")
	cmd.Flags().StringVarP(&out, "output", "o", "", "write to this file instead of stdout")
	return cmd
}

// initEnvironment reads dir and renders the DevEnvironment init proposes.
// The spec is checked by the planner before it is written, as the
// operator would check it: init never writes what devloop would refuse for
// its own reasons.
func initEnvironment(dir string, o initOptions) ([]byte, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	s, err := scanTree(dir)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
	if len(s.Modules) == 0 && len(s.Charts) == 0 && len(s.Kustomizations) == 0 {
		return nil, fmt.Errorf("%s has no go.mod, Helm chart or config/default kustomization: nothing to draft from", dir)
	}
	d := draftEnvironment(s, o)
	if _, err := plan.Build(&d.Spec); err != nil {
		return nil, fmt.Errorf("the drafted environment is not valid (a bug in init; please report it with the tree's layout): %w", err)
	}
	return renderDraft(dir, d)
}

// initObject is what is written: no status, no empty metadata fields.
type initObject struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec v1alpha1.DevEnvironmentSpec `json:"spec"`
}

// renderDraft writes the guesses as comments above the YAML.
func renderDraft(dir string, d *draft) ([]byte, error) {
	obj := initObject{APIVersion: v1alpha1.GroupVersion.String(), Kind: "DevEnvironment", Spec: d.Spec}
	obj.Metadata.Name = d.Name
	body, err := orderedYAML(obj)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# A first DevEnvironment for %s, written by `kubectl devloop init`: edit it,\n", dir)
	b.WriteString("# then `kubectl apply -f` it. What init read and guessed:\n")
	for _, n := range d.Notes {
		writeWrapped(&b, "# - ", "#   ", n)
	}
	fmt.Fprintf(&b, "#\n# Then: kubectl apply -f THIS-FILE; kubectl devloop push . --env %s --source %s --watch\n", d.Name, initSource)
	b.Write(body)
	return b.Bytes(), nil
}

// orderedYAML writes v as YAML in its fields' declaration order (name
// first, as people write it), not sorted as sigs.k8s.io/yaml sorts: JSON
// is read as a YAML node tree, which keeps the order, and written in block
// style.
func orderedYAML(v any) ([]byte, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var n yaml.Node
	if err := yaml.Unmarshal(j, &n); err != nil {
		return nil, err
	}
	blockStyle(&n)
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	enc.CompactSeqIndent() // "  - name:", as kubectl writes lists
	if err := enc.Encode(&n); err != nil {
		return nil, err
	}
	return b.Bytes(), enc.Close()
}

func blockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// writeWrapped writes s as comment lines of at most 100 columns.
func writeWrapped(b *bytes.Buffer, first, rest, s string) {
	line := first
	for _, w := range strings.Fields(s) {
		if len(line)+len(w) > 100 && strings.TrimSpace(line) != strings.TrimSpace(first) {
			b.WriteString(strings.TrimRight(line, " ") + "\n")
			line = rest
		}
		line += w + " "
	}
	b.WriteString(strings.TrimRight(line, " ") + "\n")
}
