// Command push packs a directory as an OCI source artifact and pushes it,
// until `kubectl devloop push` exists:
//
//	go run ./hack/localrun/push <dir> <registry>/<repository>:<tag>
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/devloop-dev/devloop/internal/source"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: push <dir> <repository:tag>   (plain HTTP: for the local registry only)")
		os.Exit(2)
	}
	d, err := source.PushDir(context.Background(), os.Args[1], os.Args[2], true)
	if err != nil {
		fmt.Fprintln(os.Stderr, "push:", err)
		os.Exit(1)
	}
	fmt.Printf("pushed %s as %s@%s\n", os.Args[1], os.Args[2], d)
}
