package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devloop-dev/devloop/internal/testenv"
)

// The push tests run the real operator as it runs in a cluster: the
// manager binary, built from cmd/manager, as its own process against the
// test API server (source fetcher, in-process image builds, the deploy
// engine impersonating the environment's ServiceAccount), watching one
// namespace only (--watch-namespace), so the other tests can play the
// operator's part by hand in theirs.
var operator struct {
	once    sync.Once
	ns      string
	err     error
	cmd     *exec.Cmd
	done    chan struct{}
	workDir string
}

// operatorNamespace starts the operator once and returns the namespace it
// reconciles, with the ServiceAccount "deployer" in it.
func operatorNamespace(t *testing.T) string {
	t.Helper()
	operator.once.Do(func() { operator.err = startOperator() })
	if operator.err != nil {
		t.Fatalf("starting the operator: %v", operator.err)
	}
	return operator.ns
}

func startOperator() error {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "operated-"}}
	if err := k8s.Create(ctx, ns); err != nil {
		return err
	}
	if err := testenv.CreateDeployer(ctx, k8s, ns.Name, "deployer"); err != nil {
		return err
	}
	workDir, err := os.MkdirTemp("", "devloop-cli-operator-")
	if err != nil {
		return err
	}
	// The operator runs as its ServiceAccount with the chart's RBAC, not
	// as the tests' admin.
	user, err := testenv.Operator(ctx, testEnv, k8s)
	if err != nil {
		return err
	}
	data, err := user.KubeConfig()
	if err != nil {
		return err
	}
	operatorKubeconfig := filepath.Join(workDir, "operator.kubeconfig")
	if err := os.WriteFile(operatorKubeconfig, data, 0o600); err != nil {
		return err
	}
	manager, err := managerBinary(workDir)
	if err != nil {
		return err
	}
	cmd := exec.Command(manager, "--kubeconfig", operatorKubeconfig, "--watch-namespace", ns.Name,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		"--work-dir", filepath.Join(workDir, "work"), "--helper-image", "registry.test/devloop/manager:test",
		"--log-level", "error", "--log-format", "console")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = cmd.Wait()
	}()
	operator.ns, operator.cmd, operator.done, operator.workDir = ns.Name, cmd, done, workDir
	return nil
}

// stopOperator stops the operator if a test started it.
func stopOperator() {
	if operator.cmd == nil {
		return
	}
	_ = operator.cmd.Process.Signal(os.Interrupt)
	<-operator.done
	os.RemoveAll(operator.workDir)
}

// managerBinary is the operator binary the tests run: the one make test
// built before go test started (DEVLOOP_TEST_MANAGER), so its compile is
// not inside this package's test timeout nor racing the other packages'
// compiles of the same dependencies; or, run without make, built here.
func managerBinary(workDir string) (string, error) {
	if built := os.Getenv("DEVLOOP_TEST_MANAGER"); built != "" {
		if _, err := os.Stat(built); err != nil {
			return "", fmt.Errorf("DEVLOOP_TEST_MANAGER: %w", err)
		}
		return built, nil
	}
	manager := filepath.Join(workDir, "manager")
	build := exec.Command("go", "build", "-o", manager, "./cmd/manager")
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the manager: %v\n%s", err, out)
	}
	return manager, nil
}
