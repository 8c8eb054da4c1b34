package main

import (
	"os"
	"path/filepath"

	"github.com/devloop-dev/devloop/internal/supervisor"
)

// supervisorName is the name the build gives the supervisor in a
// live-updatable image (supervisor.Path). The operator image carries a
// small supervisor of its own per platform (cmd/supervisor); when none is
// there for an image's platform the build falls back to the operator's
// own binary, which started under that name is the same supervisor:
// `supervisor supervise|sync ...`.
var supervisorName = filepath.Base(supervisor.Path)

// runAsSupervisor runs the supervisor's command line when the binary was
// started under its name, and says so.
func runAsSupervisor() (code int, ok bool) {
	if filepath.Base(os.Args[0]) != supervisorName {
		return 0, false
	}
	return supervisor.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr), true
}

// helperSupervisor is `manager helper supervise|sync ...`: the same
// command line under the manager's own name.
func helperSupervisor(args []string) error {
	if code := supervisor.Main(args, os.Stdin, os.Stdout, os.Stderr); code != 0 {
		os.Exit(code)
	}
	return nil
}
