// Command link is the shaped link of the remote-cluster benchmark (issue
// 46; hack/link/link.sh sets up the rest): `link proxy` adds a round-trip
// delay on the laptop's path to the API server and the registry, and
// `link check`, run on the laptop's side, measures what the link gives.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: link proxy --rtt 40ms --routes LISTEN=TARGET,... | link check --registry HOST:PORT")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "proxy":
		fs := flag.NewFlagSet("proxy", flag.ExitOnError)
		rtt := fs.Duration("rtt", 0, "round-trip delay to add (half each way)")
		routes := fs.String("routes", "", "LISTEN=TARGET pairs, comma-separated")
		_ = fs.Parse(os.Args[2:])
		var rs []route
		if rs, err = parseRoutes(*routes); err == nil {
			err = (&delayProxy{oneWay: *rtt / 2}).serve(ctx, rs)
		}
	case "check":
		fs := flag.NewFlagSet("check", flag.ExitOnError)
		registry := fs.String("registry", "10.250.0.1:5000", "the cluster's registry, reached through the link")
		repo := fs.String("repository", "link-check/blob", "repository the sample blob is pushed to")
		size := fs.Int("mib", 8, "MiB pushed and pulled to measure the rates")
		_ = fs.Parse(os.Args[2:])
		ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		var f linkFigures
		if f, err = measureLink(ctx, *registry, *repo, *size<<20); err == nil {
			fmt.Println(f)
		}
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "link:", err)
		os.Exit(1)
	}
}
