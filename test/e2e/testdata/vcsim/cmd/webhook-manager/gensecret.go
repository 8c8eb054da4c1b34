package main

import (
	"fmt"
	"os"
)

// The chart's pre-install hook runs `vc-webhook-manager gen-secret` from
// the built image (Volcano's admission-init Job runs a script from the
// webhook image the same way).
func init() {
	if len(os.Args) > 1 && os.Args[1] == "gen-secret" {
		fmt.Println("vc-webhook-manager: admission secret generated")
		os.Exit(0)
	}
}
