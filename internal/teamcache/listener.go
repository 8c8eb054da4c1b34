package teamcache

import (
	"context"
	"net/http"
	"time"

	"github.com/devloop-dev/devloop/internal/httpserve"
)

// Listener serves the Server on Addr while the manager runs, on the
// leader only: the store is on its disk, and one store is what every
// environment must see.
type Listener struct {
	Addr   string
	Server *Server
}

// NeedLeaderElection is true: only the leader serves its store.
func (l Listener) NeedLeaderElection() bool { return true }

// Start serves until ctx ends.
func (l Listener) Start(ctx context.Context) error {
	mux := http.NewServeMux()
	mux.Handle(actionsPath, l.Server)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		// A body of DefaultMaxObjectBytes on a slow link.
		ReadTimeout:    10 * time.Minute,
		WriteTimeout:   10 * time.Minute,
		MaxHeaderBytes: 64 << 10,
	}
	return httpserve.Until(ctx, l.Addr, srv)
}
