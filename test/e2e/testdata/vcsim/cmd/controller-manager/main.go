// vc-controller-manager: one of three binaries built from this module.
package main

import (
	"context"

	"example.dev/vcsim/pkg/cluster"
	"example.dev/vcsim/pkg/serve"
)

// version is what a test edits to see new code serving.
const version = "v1"

func main() {
	cluster.Watch(context.Background(), "vc-controller-manager")
	serve.Run("vc-controller-manager", version)
}
