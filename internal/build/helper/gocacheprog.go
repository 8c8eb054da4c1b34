package helper

import (
	"context"
	"flag"
	"os"

	"github.com/devloop-dev/devloop/internal/pods"
	"github.com/devloop-dev/devloop/internal/teamcache"
)

// gocacheprogStep is GOCACHEPROG in a builder pod: the go command starts
// it and speaks cmd/go/internal/cacheprog's protocol on its stdin and
// stdout (teamcache.Prog). Without --url it is a local disk cache only.
func gocacheprogStep(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("helper gocacheprog", flag.ContinueOnError)
	dir := fs.String("dir", "", "the local cache directory (on the build cache volume)")
	url := fs.String("url", "", "the operator's team cache service, https://HOST:PORT")
	tokenFile := fs.String("token-file", "", "the pod's projected ServiceAccount token for the cache's audience")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		home, err := os.UserCacheDir()
		if err != nil {
			return err
		}
		*dir = home + "/devloop-gocache"
	}
	prog := &teamcache.Prog{Dir: *dir, Log: os.Stderr}
	if *url != "" {
		// The CA comes in the environment the build pod was given.
		prog.Remote = &teamcache.Client{URL: *url, TokenFile: *tokenFile, CA: []byte(os.Getenv(pods.EnvTeamCacheCA))}
	}
	return prog.Serve(ctx, os.Stdin, os.Stdout)
}
