package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// settingsKey is the key settings writes and helm.valuesFrom reads by
// default.
const settingsKey = "values.yaml"

// settingsFlags are the options of `settings`.
type settingsFlags struct {
	files   []settingsFile // --from-file and --optional-file, in command-line order
	sets    []string
	setEnvs []string
	secret  bool
	key     string
	dryRun  bool
}

// settingsFile is one values file; an optional one may be missing.
type settingsFile struct {
	path     string
	optional bool
}

// settingsFileFlag appends to one ordered list from two flags, so
// `--from-file a --optional-file b --from-file c` layers a, b, c.
type settingsFileFlag struct {
	files    *[]settingsFile
	optional bool
}

func (v settingsFileFlag) String() string { return "" }
func (v settingsFileFlag) Type() string   { return "path" }
func (v settingsFileFlag) Set(path string) error {
	if path == "" {
		return errors.New("empty path")
	}
	*v.files = append(*v.files, settingsFile{path: path, optional: v.optional})
	return nil
}

func newSettingsCommand(a *app) *cobra.Command {
	f := &settingsFlags{}
	cmd := &cobra.Command{
		Use:   "settings ENV NAME [--from-file FILE]... [--optional-file FILE]... [--set PATH=VALUE]... [--set-env PATH=VAR[:DEFAULT]]...",
		Short: "Write your own Helm values for an environment into the ConfigMap (or Secret) its helm.valuesFrom names",
		Long: `Merge values files, --set and --set-env into one YAML document and write
it under the key values.yaml (--key another) of the ConfigMap NAME, or with
--secret of the Secret NAME, in the environment's namespace: what a
Tiltfile reads from tilt-settings.yaml and environment variables, for a
component's helm.valuesFrom to read. The values never go into the
DevEnvironment.

Later wins: the files in command-line order (maps merged key by key, as
Helm merges values files), then each --set, then each --set-env. A file
given with --optional-file that does not exist is skipped (a settings file
each developer may or may not have). --set PATH=VALUE takes VALUE as Helm's
--set does: true, false, null and integers are typed, anything else is a
string; put lists and maps in a file. --set-env PATH=VAR:DEFAULT takes the
environment variable VAR, or DEFAULT when VAR is not set; without a
default, an unset VAR leaves what the files or --set gave PATH (a
variable that overrides a settings file), and is an error when they gave
nothing.

Written by server-side apply (field manager kubectl-devloop), labelled
devloop.dev/environment=ENV. Only names, keys and values paths are
printed, never values. A warning says when no helm.valuesFrom of the
environment names the object (a typo) or reads another key; when one
does, and the content changed, the environment is asked to reconcile now.
With valuesFrom optional: true, the environment also works before anyone
wrote the object. --dry-run prints the object with its values redacted.`,
		Example: `  # Dynamo-style: your tilt-settings.yaml if you have one, $DOCKER_SERVER over
  # what it says, and a subchart toggle
  kubectl devloop settings dynamo dynamo-settings --optional-file tilt-settings.yaml \
      --set-env dynamo-operator.dynamo.dockerRegistry.server=DOCKER_SERVER --set etcd.enabled=false

  # a credential, as a Secret (valuesFrom kind: Secret)
  kubectl devloop settings myapp app-credentials --secret --set-env auth.apiToken=API_TOKEN`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			obj, err := f.build(args[1], os.LookupEnv)
			if err != nil {
				return err
			}
			return a.writeObject(cmd.Context(), args[0], obj, f.dryRun)
		},
	}
	f.register(cmd.Flags())
	return cmd
}

// register adds the command's flags to fl.
func (f *settingsFlags) register(fl *pflag.FlagSet) {
	fl.Var(settingsFileFlag{files: &f.files}, "from-file", "a YAML values file; repeat for more (later files win)")
	fl.Var(settingsFileFlag{files: &f.files, optional: true}, "optional-file", "a YAML values file skipped when it does not exist; layered in order with --from-file")
	fl.StringArrayVar(&f.sets, "set", nil, "PATH=VALUE, e.g. operator.replicas=2; repeat for more")
	fl.StringArrayVar(&f.setEnvs, "set-env", nil, "PATH=VAR[:DEFAULT]: the environment variable VAR (else DEFAULT) at PATH; repeat for more")
	fl.BoolVar(&f.secret, "secret", false, "write a Secret instead of a ConfigMap (for values that are credentials)")
	fl.StringVar(&f.key, "key", settingsKey, "the key holding the values (helm.valuesFrom[].key)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "print the object with its values redacted; write nothing")
}

// valuesPath is a dot-separated values path, as imageValues takes.
var valuesPath = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

// envVarName is a name --set-env reads.
var envVarName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// build merges the values and makes the ConfigMap or Secret. lookupEnv
// reads the environment (os.LookupEnv outside tests).
func (f *settingsFlags) build(name string, lookupEnv func(string) (string, bool)) (*localObject, error) {
	if len(f.files) == 0 && len(f.sets) == 0 && len(f.setEnvs) == 0 {
		return nil, errors.New("nothing to write: give --from-file, --optional-file, --set or --set-env")
	}
	if errs := validation.IsConfigMapKey(f.key); len(errs) > 0 {
		return nil, fmt.Errorf("--key %q: %s", f.key, strings.Join(errs, "; "))
	}
	var notes []string
	vals := map[string]any{}
	for _, file := range f.files {
		flag := "--from-file " + file.path
		if file.optional {
			flag = "--optional-file " + file.path
		}
		data, err := readLimited(file.path)
		if errors.Is(err, fs.ErrNotExist) && file.optional {
			notes = append(notes, "skipped "+flag+": it does not exist")
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", flag, err)
		}
		doc, err := parseValues(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", flag, err)
		}
		vals = mergeValues(vals, doc)
	}
	for _, s := range f.sets {
		path, value, ok := strings.Cut(s, "=")
		if !ok || !valuesPath.MatchString(path) {
			return nil, fmt.Errorf("--set %s: want PATH=VALUE with a dot-separated PATH such as image.tag", settingOnly(path, ok))
		}
		setValue(vals, path, helmTyped(value))
	}
	for _, s := range f.setEnvs {
		path, ref, ok := strings.Cut(s, "=")
		if !ok || !valuesPath.MatchString(path) {
			return nil, fmt.Errorf("--set-env %s: want PATH=VAR[:DEFAULT] with a dot-separated PATH such as image.registry", settingOnly(path, ok))
		}
		variable, def, hasDefault := strings.Cut(ref, ":")
		if !envVarName.MatchString(variable) {
			return nil, fmt.Errorf("--set-env %s=%s: %q is not an environment variable name", path, variable, variable)
		}
		value, set := lookupEnv(variable)
		switch {
		case set:
			notes = append(notes, fmt.Sprintf("%s from $%s", path, variable))
		case hasDefault:
			value = def
			notes = append(notes, fmt.Sprintf("%s: $%s is not set, the default is used", path, variable))
		case hasValue(vals, path):
			// The variable overrides a file when set, as a Tiltfile's
			// os.getenv(VAR, settings[...]) does; unset, the file stands.
			notes = append(notes, fmt.Sprintf("%s: $%s is not set, the value from the files or --set stands", path, variable))
			continue
		default:
			return nil, fmt.Errorf("--set-env %s=%s: $%s is not set, there is no default (%s=%s:DEFAULT), and no file or --set gives %s", path, variable, variable, path, variable, path)
		}
		setValue(vals, path, helmTyped(value))
	}
	data, err := marshalValues(vals)
	if err != nil {
		return nil, err
	}
	notes = append(notes, "sets "+summarizePaths(leafPaths(vals, "")))
	kind, secretType := "ConfigMap", corev1.SecretType("")
	if f.secret {
		kind, secretType = "Secret", corev1.SecretTypeOpaque
	}
	return newLocalObject(kind, name, secretType, map[string][]byte{f.key: data}, notes...)
}

// settingOnly is what an error may quote of a --set argument: the path,
// never the value after '='.
func settingOnly(path string, hadValue bool) string {
	if hadValue {
		return path + "=…"
	}
	return "(no '=')"
}
