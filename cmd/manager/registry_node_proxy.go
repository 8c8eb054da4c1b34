package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/devloop-dev/devloop/internal/registryproxy"
)

// runRegistryNodeProxy is `manager registry-node-proxy`: the chart's
// DaemonSet (registry.nodeProxy) that gives every node the bundled
// registry at localhost:<hostPort>. It holds no secret and talks to no API.
func runRegistryNodeProxy(args []string) error {
	fs := flag.NewFlagSet("registry-node-proxy", flag.ContinueOnError)
	listen := fs.String("listen", ":5000", "address the node's hostPort reaches")
	target := fs.String("registry", "", "the registry's Service, host:port (e.g. devloop-registry.devloop-system.svc:5000)")
	maxConns := fs.Int("max-connections", 256, "connections relayed at once; more wait in the listener's backlog")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(*target); err != nil || *target == "" {
		return fmt.Errorf("--registry %q: want host:port", *target)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "registry node proxy on %s: registry %s\n", *listen, *target)
	relay := &registryproxy.Relay{Target: *target, MaxConns: *maxConns, Logf: func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, format+"\n", a...)
	}}
	return relay.Serve(ctx, ln)
}
