// Command pause is the local cluster's pod sandbox ("pause") process: it does
// nothing until SIGTERM or SIGINT, then exits 0. Built static (CGO_ENABLED=0)
// and packed onto scratch by hack/cluster/imagepack, it stands in for
// registry.k8s.io/pause, which cannot be pulled here.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	// As PID 1 of the sandbox, reap any zombie re-parented to it.
	signal.Notify(ch, syscall.SIGCHLD)
	for sig := range ch {
		if sig == syscall.SIGCHLD {
			for {
				var ws syscall.WaitStatus
				pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
			continue
		}
		os.Exit(0)
	}
}
