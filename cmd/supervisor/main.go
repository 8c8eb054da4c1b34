// Command supervisor is the live update supervisor the build puts at
// /.devloop/supervisor in live-updatable images (internal/supervisor):
// a static binary of the standard library only, so a sync's exec starts
// it at once.
package main

import (
	"os"

	"github.com/devloop-dev/devloop/internal/supervisor"
)

func main() {
	os.Exit(supervisor.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
