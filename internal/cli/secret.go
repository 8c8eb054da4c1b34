package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// secretFlags are the options of `secret`.
type secretFlags struct {
	literals, files, envFiles []string
	dockerConfig              string // "" unset; defaultDockerConfig: the default path
	dockerConfigAt            int    // with defaultDockerConfig: how many arguments came before it, else -1
	registries                []string
	// needed: without --registry, the registries the environment reads
	// the Secret for (nil: not looked up); skipped: those of them the
	// docker config has no credentials for.
	needed, skipped          []string
	dockerServer, dockerUser string
	passwordStdin            bool
	dryRun                   bool
}

// defaultDockerConfig is --docker-config given without a path: docker's
// own default, which is what it reads as in the help.
const defaultDockerConfig = "$DOCKER_CONFIG/config.json"

func newSecretCommand(a *app) *cobra.Command {
	f := &secretFlags{}
	cmd := &cobra.Command{
		Use:   "secret ENV NAME (--from-literal|--from-file|--from-env-file ... | --docker-config[=PATH] | --docker-server ...)",
		Short: "Create or update a Secret an environment names, from local files, literals or your docker config",
		Long: `Write the Secret NAME in the environment's namespace from what you have
locally, so its content never goes into the DevEnvironment (or into Git).

A generic (Opaque) Secret takes keys from --from-literal KEY=VALUE,
--from-file [KEY=]PATH (KEY defaults to the file's name; a directory gives
one key per regular file in it) and --from-env-file PATH (KEY=VALUE lines;
a line with only KEY takes the value of that environment variable).

A kubernetes.io/dockerconfigjson Secret (spec.registry.credentialsRef,
an oci source's secretRef, a chart registry's credentials) takes the auths
entries of a docker config: --docker-config alone reads
$DOCKER_CONFIG/config.json or ~/.docker/config.json, --docker-config=PATH
another file. Only the entries of the registries the environment reads
this Secret for are kept (spec.registry, an oci source, a chart
registry), or those --registry HOST names; no proxies, headers or
helper settings. An entry whose credentials are in a credential helper
(credsStore, credHelpers) is asked of that helper (docker-credential-NAME on PATH);
when that cannot work the command fails and names the registry.
--docker-server, --docker-username and --docker-password-stdin add one
registry's credentials without a docker config (the password is read
from stdin, so it stays out of your shell history).

The Secret is written by server-side apply (field manager kubectl-devloop)
and labelled devloop.dev/environment=ENV. Only names and keys are printed,
never values. A warning says when the environment does not reference the
Secret (a typo) or could not use it as written; when it does, and the
content changed, the environment is asked to reconcile now. --dry-run
prints the Secret with its values redacted and writes nothing.`,
		Example: `  # the registry credentials of spec.registry.credentialsRef, from docker login
  kubectl devloop secret gpu-operator registry-secret --docker-config --registry registry.example.com

  # one registry, the token from a password manager
  pass show ci/registry | kubectl devloop secret gpu-operator registry-secret \
      --docker-server registry.example.com --docker-username ci --docker-password-stdin

  # an app Secret from a key file and a literal (OCM-style)
  kubectl devloop secret ocm signing-keys --from-file key.pem=./keys/private.pem --from-literal issuer=dev`,
		Args: func(cmd *cobra.Command, args []string) error {
			_, _, err := f.positional(args)
			return err
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			env, name, _ := f.positional(args)
			if f.dockerConfig != "" && len(f.registries) == 0 {
				var err error
				if f.needed, err = a.neededRegistries(cmd.Context(), env, name); err != nil {
					return err
				}
			}
			obj, err := f.build(cmd.Context(), name, a.streams.In)
			if err != nil {
				return err
			}
			return a.writeObject(cmd.Context(), env, obj, f.dryRun)
		},
	}
	f.register(cmd.Flags())
	return cmd
}

// register adds the command's flags to fl.
func (f *secretFlags) register(fl *pflag.FlagSet) {
	fl.StringArrayVar(&f.literals, "from-literal", nil, "KEY=VALUE; repeat for more keys")
	fl.StringArrayVar(&f.files, "from-file", nil, "[KEY=]PATH: a file's content as a key (KEY defaults to the file name); a directory gives one key per file")
	fl.StringArrayVar(&f.envFiles, "from-env-file", nil, "PATH of KEY=VALUE lines; repeat for more files")
	f.dockerConfigAt = -1
	fl.Var(dockerConfigFlag{f: f, fl: fl}, "docker-config", "a kubernetes.io/dockerconfigjson Secret from the auths of a docker config (alone: $DOCKER_CONFIG/config.json, else ~/.docker/config.json; another file with --docker-config=PATH)")
	fl.Lookup("docker-config").NoOptDefVal = defaultDockerConfig
	fl.StringArrayVar(&f.registries, "registry", nil, "with --docker-config: keep only this registry host (default: the registries the environment reads the Secret for); repeat for more")
	fl.StringVar(&f.dockerServer, "docker-server", "", "a registry host for a kubernetes.io/dockerconfigjson Secret (with --docker-username and --docker-password-stdin)")
	fl.StringVar(&f.dockerUser, "docker-username", "", "the user name for --docker-server")
	fl.BoolVar(&f.passwordStdin, "docker-password-stdin", false, "read the password (or token) for --docker-server from stdin")
	fl.BoolVar(&f.dryRun, "dry-run", false, "print the Secret with its values redacted; write nothing")
}

// dockerConfigFlag is --docker-config[=PATH]. Its value is optional, so
// `--docker-config PATH` leaves PATH among the arguments; the flag records
// how many arguments preceded it, which is where PATH then is, whatever
// the order of flags and arguments.
type dockerConfigFlag struct {
	f  *secretFlags
	fl *pflag.FlagSet
}

func (v dockerConfigFlag) String() string { return "" }
func (v dockerConfigFlag) Type() string   { return "path" }
func (v dockerConfigFlag) Set(path string) error {
	v.f.dockerConfig, v.f.dockerConfigAt = path, -1
	if path == defaultDockerConfig {
		v.f.dockerConfigAt = v.fl.NArg()
	}
	return nil
}

// positional reads ENV and NAME, and the path of `--docker-config PATH`
// when it was given after a space.
func (f *secretFlags) positional(args []string) (env, name string, err error) {
	if len(args) == 3 && f.dockerConfigAt >= 0 && f.dockerConfigAt < 3 {
		f.dockerConfig = args[f.dockerConfigAt]
		args = slices.Delete(slices.Clone(args), f.dockerConfigAt, f.dockerConfigAt+1)
	}
	if len(args) != 2 {
		return "", "", fmt.Errorf("secret needs ENV (the DevEnvironment) and NAME (the Secret), got %d arguments", len(args))
	}
	return args[0], args[1], nil
}

// build makes the Secret the flags describe.
func (f *secretFlags) build(ctx context.Context, name string, stdin io.Reader) (*localObject, error) {
	generic := len(f.literals) > 0 || len(f.files) > 0 || len(f.envFiles) > 0
	docker := f.dockerConfig != "" || f.dockerServer != "" || f.dockerUser != "" || f.passwordStdin
	switch {
	case generic && docker:
		return nil, errors.New("--from-literal, --from-file and --from-env-file make a generic Secret, --docker-* a kubernetes.io/dockerconfigjson Secret: write them as two Secrets")
	case !generic && !docker:
		return nil, errors.New("nothing to write: give --from-literal, --from-file, --from-env-file, --docker-config or --docker-server")
	case len(f.registries) > 0 && f.dockerConfig == "":
		return nil, errors.New("--registry picks registries of --docker-config; with --docker-server the registry is that server")
	case docker:
		return f.buildDocker(ctx, name, stdin)
	}
	data := map[string][]byte{}
	from := map[string]string{} // key -> the flag that gave it, for duplicates
	add := func(key, flag string, value []byte) error {
		if errs := validation.IsConfigMapKey(key); len(errs) > 0 {
			return fmt.Errorf("%s: key %q is not a valid Secret key: %s", flag, key, strings.Join(errs, "; "))
		}
		if prev, dup := from[key]; dup {
			return fmt.Errorf("%s: key %q is already given by %s", flag, key, prev)
		}
		data[key], from[key] = value, flag
		return nil
	}
	for i, lit := range f.literals {
		flag := fmt.Sprintf("--from-literal #%d", i+1) // never the argument: it holds the value
		key, value, ok := strings.Cut(lit, "=")
		if !ok || key == "" {
			return nil, fmt.Errorf("%s: want KEY=VALUE", flag)
		}
		if err := add(key, flag+" ("+key+")", []byte(value)); err != nil {
			return nil, err
		}
	}
	for _, spec := range f.files {
		if err := readFromFile(spec, add); err != nil {
			return nil, err
		}
	}
	for _, path := range f.envFiles {
		if err := readEnvFile(path, add); err != nil {
			return nil, err
		}
	}
	return newLocalObject("Secret", name, corev1.SecretTypeOpaque, data)
}

// readFromFile adds --from-file [KEY=]PATH: a file, or each regular file
// of a directory under its own name.
func readFromFile(spec string, add func(key, flag string, value []byte) error) error {
	flag := "--from-file " + spec
	key, path, named := strings.Cut(spec, "=")
	if !named {
		key, path = "", spec
	}
	if path == "" {
		return fmt.Errorf("%s: want [KEY=]PATH", flag)
	}
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	if !st.IsDir() {
		if key == "" {
			key = filepath.Base(path)
		}
		data, err := readLimited(path)
		if err != nil {
			return fmt.Errorf("%s: %w", flag, err)
		}
		return add(key, flag, data)
	}
	if named {
		return fmt.Errorf("%s: a directory gives one key per file; drop KEY=", flag)
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := readLimited(filepath.Join(path, e.Name()))
		if err != nil {
			return fmt.Errorf("%s: %w", flag, err)
		}
		if err := add(e.Name(), flag, data); err != nil {
			return err
		}
	}
	return nil
}

// readEnvFile adds the KEY=VALUE lines of an env file. Values are taken
// as written (no quotes removed), as kubectl create secret does.
func readEnvFile(path string, add func(key, flag string, value []byte) error) error {
	data, err := readLimited(path)
	if err != nil {
		return fmt.Errorf("--from-env-file %s: %w", path, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), maxObjectData)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if n == 1 {
			line = strings.TrimPrefix(line, "\uFEFF")
		}
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		where := fmt.Sprintf("--from-env-file %s:%d", path, n)
		key, value, ok := strings.Cut(line, "=")
		key = strings.TrimSpace(key)
		if !ok {
			v, set := os.LookupEnv(key)
			if !set {
				return fmt.Errorf("%s: %q has no value and no environment variable of that name is set", where, key)
			}
			value = v
		}
		if err := add(key, where, []byte(value)); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("--from-env-file %s: %w", path, err)
	}
	return nil
}

// readLimited reads a local file of at most maxObjectData bytes.
func readLimited(path string) ([]byte, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	data, err := io.ReadAll(io.LimitReader(file, maxObjectData+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxObjectData {
		return nil, fmt.Errorf("%s is over 1 MiB, more than a Secret or ConfigMap holds", path)
	}
	return data, nil
}
