package helper

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// countStep is a builder Job's build container when the image names its
// Go packages: it counts their dependencies (countPackages, the warm
// build's count) in the workspace, then becomes the build command
// (exec, same pid, same output, same exit code), so the operator reads
// "N of M packages compiled" from the container's log as it does from a
// warm build's. A count that fails prints why and no total; the build
// runs all the same.
func countStep(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("helper count-packages", flag.ContinueOnError)
	pkgsJSON := fs.String("packages", "", "Go packages whose dependencies to count, as a JSON list")
	if err := fs.Parse(args); err != nil {
		return err
	}
	command := fs.Args()
	if len(command) == 0 {
		return errors.New("count-packages: no build command after --")
	}
	var pkgs []string
	if err := json.Unmarshal([]byte(*pkgsJSON), &pkgs); err != nil {
		return fmt.Errorf("--packages: %w", err)
	}
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	if len(pkgs) > 0 {
		countPackages(ctx, dir, pkgs, os.Environ(), os.Stderr, os.Stdout)
	}
	path, err := exec.LookPath(command[0])
	if err != nil {
		// What a shell says and exits with for a command it cannot find.
		fmt.Fprintf(os.Stderr, "%s: command not found\n", command[0])
		return ExitError{Code: 127, err: err}
	}
	return syscall.Exec(path, command, os.Environ())
}
