package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/devloop-dev/devloop/internal/build/helper"
	"github.com/devloop-dev/devloop/internal/pods"
	"github.com/devloop-dev/devloop/internal/supervisor"
	"github.com/devloop-dev/devloop/internal/testrun"
)

// runHelper is `manager helper STEP [flags]`: the steps of builder and
// test pods that run the operator's own code, each kept by the package
// that writes its command line and reads what it reports.
func runHelper(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: manager helper fetch|assemble|install|idle|build|count-packages|test-report|supervise|sync [flags]")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	step := args[0]
	switch {
	case step == "fetch":
		return helper.ExitCodeFor(pods.FetchStep(ctx, args[1:]))
	case slices.Contains(helper.Steps, step):
		return helper.ExitCodeFor(helper.Run(ctx, args))
	case step == "test-report":
		return testrun.ReportStep(ctx, args[1:])
	case step == "supervise", step == "sync": // the live update supervisor, as supervisor.Path runs it
		if code := supervisor.Main(args, os.Stdin, os.Stdout, os.Stderr); code != 0 {
			os.Exit(code)
		}
		return nil
	default:
		return fmt.Errorf("unknown helper %q: want fetch, assemble, install, idle, build, count-packages, test-report, supervise or sync", step)
	}
}

// runAsSupervisor runs the supervisor's command line when the binary was
// started under the name the build gives the supervisor in a
// live-updatable image (supervisor.Path), and says so. The operator image
// carries a small supervisor of its own per platform (cmd/supervisor);
// when none is there for an image's platform the build falls back to the
// operator's own binary, which started under that name is the same
// supervisor: `supervisor supervise|sync ...`.
func runAsSupervisor() (code int, ok bool) {
	if filepath.Base(os.Args[0]) != filepath.Base(supervisor.Path) {
		return 0, false
	}
	return supervisor.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr), true
}
