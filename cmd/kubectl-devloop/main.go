// Command kubectl-devloop is the devloop kubectl plugin: on the PATH,
// `kubectl devloop push|status|logs|trigger|cancel|wait`. The commands live
// in internal/cli.
package main

import (
	"os"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/internal/cli"
)

func main() {
	// The plugin reports what went wrong through its commands' errors;
	// controller-runtime's own log has nothing for its user, and unset it
	// prints a warning with a goroutine stack after 30 s (a log follower).
	ctrllog.SetLogger(logr.Discard())
	os.Exit(cli.Main(os.Args[1:]))
}
