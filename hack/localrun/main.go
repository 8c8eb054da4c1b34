// Command localrun is `make run-local`, a lighter main job than `make
// dev-up`'s cluster, without nodes: it starts a real etcd and kube-apiserver
// (the binaries `make test` builds) and a real distribution registry, installs the CRD,
// runs the operator binary against them, pushes the sample's source to the
// registry, applies the samples and waits until every environment is Ready:
// its image built in the operator and pushed under two tags.
//
//	go run ./hack/localrun [--exit-when-ready]
//
// Without --exit-when-ready it keeps everything running until interrupted,
// so `kubectl --kubeconfig bin/local/kubeconfig get devenv` can look.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/internal/testregistry"
)

func main() {
	exitWhenReady := flag.Bool("exit-when-ready", false, "stop everything once the samples are Ready (a smoke test)")
	manager := flag.String("manager", "bin/manager", "operator binary to run")
	samples := flag.String("samples", "config/samples/local", "directory of DevEnvironment samples to apply; each <name>-src/ beside them is pushed as the OCI source localhost:5000/samples/<name>-src:dev")
	flag.Parse()
	if err := run(*manager, *samples, *exitWhenReady); err != nil {
		fmt.Fprintln(os.Stderr, "localrun:", err)
		os.Exit(1)
	}
}

func run(managerBin, samplesDir string, exitWhenReady bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()

	step("starting etcd and kube-apiserver")
	env, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() {
		step("stopping the control plane")
		_ = env.Stop()
	}()
	kubeconfig, err := writeKubeconfig(env)
	if err != nil {
		return err
	}
	localDir := filepath.Dir(kubeconfig)

	step("starting the distribution registry")
	regDir := filepath.Join(localDir, "registry")
	if err := os.RemoveAll(regDir); err != nil {
		return err
	}
	if err := os.MkdirAll(regDir, 0o755); err != nil {
		return err
	}
	registry, err := testregistry.Run(regDir)
	if err != nil {
		return err
	}
	defer func() {
		step("stopping the registry")
		registry.Stop()
	}()
	fmt.Printf("    registry at %s (plain HTTP, loopback only)\n", registry.Host)

	step("starting the operator: " + managerBin)
	mgr := exec.CommandContext(ctx, managerBin, "--kubeconfig", kubeconfig, "--log-format", "console",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "127.0.0.1:18081")
	logFile, err := os.Create(filepath.Join(filepath.Dir(kubeconfig), "manager.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	mgr.Stdout, mgr.Stderr = logFile, logFile
	mgr.Cancel = func() error { return mgr.Process.Signal(syscall.SIGTERM) }
	if err := mgr.Start(); err != nil {
		return fmt.Errorf("starting %s (run `make build` first): %w", managerBin, err)
	}
	defer func() { _ = mgr.Cancel(); _ = mgr.Wait() }()

	k8s, err := client.New(env.Config, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		return err
	}
	names, err := applySamples(ctx, k8s, samplesDir, registry.Host)
	if err != nil {
		return err
	}
	step(fmt.Sprintf("applied %d samples; waiting until they are Ready", len(names)))
	if err := waitReady(ctx, k8s, names); err != nil {
		return fmt.Errorf("%w (operator log: %s)", err, logFile.Name())
	}
	step(fmt.Sprintf("all samples Ready in %.1fs", time.Since(start).Seconds()))
	printImages(ctx, k8s, names)
	printEnvironments(kubeconfig)
	fmt.Printf(`
Look around:
  kubectl --kubeconfig %[1]s get devenv
  kubectl --kubeconfig %[1]s get devenv hello -o yaml
  kubectl --kubeconfig %[1]s explain devenv.spec.components.images
  go tool crane ls --insecure %[3]s/samples/hello
  tail -f %[2]s

Edit config/samples/local/hello-src and push it again to rebuild:
  go run ./hack/localrun/push config/samples/local/hello-src %[3]s/samples/hello-src:dev
  kubectl --kubeconfig %[1]s annotate devenv hello --overwrite devloop.dev/reconcile-requested-at="$(date +%%s)"

This control plane has no nodes: the image is built and pushed for real and
the sample's manifests are applied (a suspended CronJob whose pod template
names the built digest: kubectl get cronjob hello -o yaml), but no pod runs.
A real single-node cluster: make cluster-up (see hack/cluster/README.md).
`, kubeconfig, logFile.Name(), registry.Host)
	if exitWhenReady {
		return nil
	}
	fmt.Println("Press Ctrl-C to stop.")
	<-ctx.Done()
	return nil
}

// printEnvironments shows `kubectl get devenv` with the kubectl that
// `make test` builds, when it is there.
func printEnvironments(kubeconfig string) {
	assets, err := testenv.AssetsDir()
	if err != nil {
		return
	}
	out, err := exec.Command(filepath.Join(assets, "kubectl"), "--kubeconfig", kubeconfig, "get", "devenv", "-A").CombinedOutput()
	if err == nil {
		fmt.Printf("\n$ kubectl get devenv -A\n%s", out)
	}
}

func step(msg string) { fmt.Printf("==> %s\n", msg) }

// writeKubeconfig writes an admin kubeconfig under bin/local/.
func writeKubeconfig(env *envtest.Environment) (string, error) {
	user, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(testenv.RepoRoot(), "bin", "local")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubeconfig")
	return path, os.WriteFile(path, data, 0o600)
}

// applySamples pushes each sample's source directory (<name>-src/) to the
// registry and applies the samples, with localhost:5000 replaced by the
// registry's address.
func applySamples(ctx context.Context, k8s client.Client, dir, registryHost string) ([]client.ObjectKey, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var keys []client.ObjectKey
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		data = bytes.ReplaceAll(data, []byte("localhost:5000"), []byte(registryHost))
		env := &v1alpha1.DevEnvironment{}
		if err := yaml.UnmarshalStrict(data, env); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		srcDir := filepath.Join(dir, env.Name+"-src")
		if _, err := os.Stat(srcDir); err == nil {
			ref := fmt.Sprintf("%s/samples/%s-src:dev", registryHost, env.Name)
			d, err := source.PushDir(ctx, srcDir, ref, true)
			if err != nil {
				return nil, err
			}
			fmt.Printf("    pushed %s as %s@%s\n", srcDir, ref, d)
		}
		env.Namespace = "default"
		if sa := env.Spec.ServiceAccountName; sa != "" {
			if err := testenv.CreateDeployer(ctx, k8s, env.Namespace, sa); err != nil {
				return nil, err
			}
			fmt.Printf("    serviceaccount/%s created with a Role on namespace %s (every write of the environment is impersonated as it)\n", sa, env.Namespace)
		}
		if err := k8s.Create(ctx, env); err != nil {
			return nil, fmt.Errorf("applying %s: %w", f, err)
		}
		fmt.Printf("    devenvironment/%s created\n", env.Name)
		keys = append(keys, client.ObjectKeyFromObject(env))
	}
	return keys, nil
}

// cronJobImages are the images of the CronJobs among objs, to show that
// what was deployed names the built digest.
func cronJobImages(ctx context.Context, k8s client.Client, namespace string, objs []v1alpha1.ObjectRef) []string {
	var images []string
	for _, o := range objs {
		if o.Kind != "CronJob" {
			continue
		}
		cj := &batchv1.CronJob{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: o.Name}, cj); err != nil {
			continue
		}
		for _, c := range cj.Spec.JobTemplate.Spec.Template.Spec.Containers {
			images = append(images, c.Image)
		}
	}
	return images
}

// printImages shows what was built: every image's digest and tags.
func printImages(ctx context.Context, k8s client.Client, keys []client.ObjectKey) {
	for _, key := range keys {
		env := &v1alpha1.DevEnvironment{}
		if err := k8s.Get(ctx, key, env); err != nil {
			continue
		}
		for _, c := range env.Status.Components {
			for _, img := range c.Images {
				fmt.Printf("    built %s@%s\n      tags: %s\n", img.Repository, img.Digest, strings.Join(img.Tags, ", "))
			}
			objs, _ := c.OwnedObjects()
			for _, o := range objs {
				fmt.Printf("    deployed %s %s/%s (as %s)\n", o.Kind, o.Namespace, o.Name, env.Spec.ServiceAccountName)
			}
			if pinned := cronJobImages(ctx, k8s, env.Namespace, objs); len(pinned) > 0 {
				fmt.Printf("      its pod template runs %s\n", strings.Join(pinned, ", "))
			}
		}
	}
}

func waitReady(ctx context.Context, k8s client.Client, keys []client.ObjectKey) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, key := range keys {
		for {
			env := &v1alpha1.DevEnvironment{}
			if err := k8s.Get(ctx, key, env); err != nil {
				return err
			}
			ready := meta.FindStatusCondition(env.Status.Conditions, v1alpha1.ConditionReady)
			if ready != nil && ready.Status == "True" && env.Status.ObservedGeneration == env.Generation {
				fmt.Printf("    %s Ready: %s (components %s)\n", key.Name, ready.Message, env.Status.ComponentsReady)
				break
			}
			select {
			case <-ctx.Done():
				msg := "no status yet"
				if ready != nil {
					msg = ready.Message
				}
				return errors.New(key.Name + " did not become Ready: " + msg)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}
