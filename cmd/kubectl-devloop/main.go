// Command kubectl-devloop is the devloop kubectl plugin: on the PATH,
// `kubectl devloop push|status|logs|trigger|cancel|wait`. The commands live
// in internal/cli.
package main

import (
	"os"

	"github.com/devloop-dev/devloop/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:]))
}
