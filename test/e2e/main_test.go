//go:build e2e

// Package e2e runs devloop on the real single-node cluster of hack/cluster
// (make cluster-up): the operator in the cluster from its own chart, real
// pods, real Jobs, the real registry.
//
//	make e2e     # cluster up, this suite, cluster down
//	make cluster-up && go test -tags e2e ./test/e2e/ -v -count=1
package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/internal/devcluster"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// dc is the cluster with devloop installed; nil when there is no cluster
// (every test then skips) or setup failed (setupErr; every test fails).
var (
	dc       *devcluster.Cluster
	setupErr error
	// operatorImage is repository@digest of the operator image.
	operatorImage string
	// goImage is repository@digest of the Go builder image this run
	// pushed: by digest, so a node that holds an older image under the same
	// tag (pulled IfNotPresent) runs this one.
	goImage string
)

func TestMain(m *testing.M) {
	// The cases run the plugin in-process (cli.Run), whose clients log
	// through controller-runtime; the plugin's main discards those logs,
	// and so does this one, instead of controller-runtime's warning stack.
	ctrllog.SetLogger(logr.Discard())
	ctx := context.Background()
	c, err := devcluster.Connect(ctx, testenv.RepoRoot())
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: skipping:", err)
		os.Exit(m.Run())
	}
	dc = c
	if os.Getenv("DEVLOOP_E2E_OPERATOR") == "skip" {
		// Cases of the cluster itself (needCluster) only, e.g. its nodes.
		setupErr = fmt.Errorf("DEVLOOP_E2E_OPERATOR=skip: the operator was not installed")
		os.Exit(m.Run())
	}
	start := time.Now()
	setupErr = setup(ctx)
	fmt.Fprintf(os.Stderr, "e2e: operator and images ready in %s (err: %v)\n", time.Since(start).Round(time.Millisecond), setupErr)
	os.Exit(m.Run())
}

// setup pushes the operator and Go images and installs the operator from
// its chart, as make dev-up does.
func setup(ctx context.Context) error {
	var err error
	if operatorImage, err = dc.PushOperator(ctx, nil); err != nil {
		return err
	}
	if goImage, err = dc.PushGoImage(ctx); err != nil {
		return err
	}
	var extra []string
	if lvl := os.Getenv("DEVLOOP_E2E_LOG_LEVEL"); lvl != "" {
		// debug shows each reconcile step's timing, for the benchmark's breakdown.
		extra = append(extra, "--log-level="+lvl)
	}
	return dc.InstallOperator(ctx, operatorImage, extra...)
}

// longCase skips a case CI leaves out (DEVLOOP_E2E_LONG=skip, make
// e2e-ci): each costs minutes of cold compiles (in the cluster, or of a
// fixture on the host) or of waiting, and .ci/run must fit in its 90
// minutes on a cold machine. make e2e runs them; docs/development.md says
// which and why.
func longCase(t *testing.T) {
	t.Helper()
	if os.Getenv("DEVLOOP_E2E_LONG") == "skip" {
		t.Skip("a long case: make e2e runs it, CI's make e2e-ci does not (DEVLOOP_E2E_LONG=skip)")
	}
}

// need skips without a cluster and fails when setup failed.
func need(t *testing.T) *devcluster.Cluster {
	t.Helper()
	if dc == nil {
		t.Skip("no local cluster: run `make cluster-up` first (or `make e2e`)")
	}
	if setupErr != nil {
		t.Fatalf("setting up devloop on the cluster: %v", setupErr)
	}
	return dc
}
