package cli

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

func newStatusCommand(a *app) *cobra.Command {
	var output, label string
	cmd := &cobra.Command{
		Use:   "status ENV",
		Short: "Show the environment as a tree: components in DAG order, images, releases, phases, last test results",
		Long: `Show the environment as a tree: sources with their resolved revisions; components
in dependency order (← names what each depends on) with phase, images (short
digest and tags), builder Job, Helm release revision, applied manifests and,
when not Ready, the reason; every test suite with its latest run.

-o json and -o yaml print a StatusView for scripts: name, namespace,
generation, observedGeneration, ready, conditions, planError, sources,
components (the status of each, in DAG order, plus dependsOn), tests (the
status of each with all its runs, newest first, plus dependsOn, labels,
trigger and lastRun), lastHandledTrigger and lastHandledReconcileAt. Field
names are those of the DevEnvironment status.`,
		Example: `  kubectl devloop status volcano
  kubectl devloop status volcano -l core
  kubectl devloop status volcano -o json | jq -r '.tests[] | "\(.name) \(.lastRun.result)"'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != "json" && output != "yaml" {
				return fmt.Errorf("--output %q: want json or yaml (or nothing, for the tree)", output)
			}
			_, env, err := a.connectTo(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			v := newStatusView(env)
			if label != "" {
				if err := selectByLabel(v, env, label); err != nil {
					return err
				}
			}
			switch output {
			case "json":
				data, err := json.MarshalIndent(v, "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(a.out(), "%s\n", data)
				return err
			case "yaml":
				data, err := yaml.Marshal(v)
				if err != nil {
					return err
				}
				_, err = a.out().Write(data)
				return err
			}
			renderTree(a.out(), v, a.colorFor(a.out()), time.Now())
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml: a StatusView for scripts instead of the tree")
	cmd.Flags().StringVarP(&label, "selector", "l", "", "show only the components and test suites with this label (components[].labels, tests[].labels)")
	return cmd
}
