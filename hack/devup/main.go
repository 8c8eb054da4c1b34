// Command devup is `make dev-up`'s second half, after `hack/cluster/cluster.sh
// up`: it puts devloop on the local cluster and the sample environment on
// devloop, then says what it did and how to look.
//
//  1. the operator image (compiled for this machine, assembled and pushed with
//     devloop's own go-containerregistry code) and a Go builder image;
//  2. the operator, in the cluster, from its own chart (charts/devloop);
//  3. the sample of config/samples/dev: a restricted namespace with a
//     deployer ServiceAccount, its source pushed as an OCI artifact, the
//     DevEnvironment applied and followed until Ready.
//
// Every step is idempotent; a second run with nothing changed takes seconds.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/internal/devcluster"
	"github.com/devloop-dev/devloop/internal/testenv"
)

func main() {
	timeout := flag.Duration("timeout", 10*time.Minute, "how long to wait for the sample to be Ready")
	flag.Parse()
	// dev-up says what it does itself; unset, controller-runtime's log
	// prints a warning with a goroutine stack after 30 s.
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "dev-up:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, timeout time.Duration) error {
	r := newReporter()
	step := r.step
	c, err := devcluster.Connect(ctx, testenv.RepoRoot())
	if err != nil {
		return err
	}
	var operator string
	err = r.during("compiling the operator for this machine's platform", func(progress io.Writer) (err error) {
		operator, err = c.PushOperator(ctx, progress)
		return err
	})
	if err != nil {
		return err
	}
	step("operator image %s", operator)
	var golang string
	err = r.during("assembling the Go builder image", func(io.Writer) (err error) {
		golang, err = c.PushGoImage(ctx)
		return err
	})
	if err != nil {
		return err
	}
	step("Go builder image %s (%s)", golang, devcluster.GoImage)
	if err := r.during("installing the operator's chart and waiting for its rollout", func(io.Writer) error {
		return c.InstallOperator(ctx, operator)
	}); err != nil {
		return err
	}
	step("operator running: helm release %s/%s, deployment %s", devcluster.OperatorNamespace, devcluster.OperatorRelease, devcluster.OperatorDeployment)

	if err := c.PrepareNamespace(ctx, devcluster.SampleNamespace); err != nil {
		return err
	}
	digest, err := devcluster.PushSource(ctx, c.SampleDir(), devcluster.SampleSource)
	if err != nil {
		return err
	}
	step("sample source %s pushed as %s@%s", rel(c, c.SampleDir()), devcluster.SampleSource, digest)
	env, err := c.Sample()
	if err != nil {
		return err
	}
	if err := c.ApplyEnvironment(ctx, env); err != nil {
		return err
	}
	step("applied DevEnvironment %s/%s; waiting until Ready (both images are compiled in the cluster: web in its warm builder pod, validator in a builder Job; their logs follow)", env.Namespace, env.Name)
	watch := newEnvWatch(ctx, r, c.Kubeconfig)
	env, err = c.WaitReady(ctx, client.ObjectKeyFromObject(env), timeout, watch.observe)
	watch.stop()
	if err != nil {
		return err
	}
	step("%s/%s is Ready", env.Namespace, env.Name)
	for _, comp := range env.Status.Components {
		for _, img := range comp.Images {
			fmt.Printf("    image %-10s %s@%s tags %v\n", img.Name, img.Repository, img.Digest, img.Tags)
		}
		if comp.Release != nil {
			fmt.Printf("    release %s/%s revision %d %s\n", comp.Release.Namespace, comp.Release.Name, comp.Release.Revision, comp.Release.Status)
		}
	}
	kubectl := filepath.Join("bin", "k8s", "v1.37.2", "kubectl")
	fmt.Printf(`
How to look:
  export KUBECONFIG=%s
  %s get devenv -A
  %s -n %s get pods
  %s -n %s logs deploy/%s
Run the tests (the operator consumes the annotation, so repeating it runs again):
  %s -n %s annotate devenv %s trigger=smoke
  %s -n %s annotate devenv %s trigger=all
Change the service and push it (what kubectl devloop push does):
  edit config/samples/dev/src/cmd/web/main.go, then run make dev-up again
Stop: make dev-down (the cluster keeps its state); remove everything: make dev-clean
`, c.Kubeconfig, kubectl, kubectl, env.Namespace, kubectl, devcluster.OperatorNamespace, devcluster.OperatorDeployment,
		kubectl, env.Namespace, env.Name, kubectl, env.Namespace, env.Name)
	return nil
}

func rel(c *devcluster.Cluster, p string) string {
	if r, err := filepath.Rel(c.Root, p); err == nil {
		return r
	}
	return p
}
