package registryauth

import (
	"context"
	"net/http"
	"time"

	"github.com/devloop-dev/devloop/internal/httpserve"
)

// Listener serves the token endpoint at /token on Addr while the manager
// runs, on every replica (not only the leader): the registry may send a
// client to any of them.
type Listener struct {
	Addr    string
	Handler http.Handler
}

// NeedLeaderElection is false: every replica answers token requests.
func (l Listener) NeedLeaderElection() bool { return false }

// Start serves until ctx ends.
func (l Listener) Start(ctx context.Context) error {
	mux := http.NewServeMux()
	mux.Handle("/token", l.Handler)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	return httpserve.Until(ctx, l.Addr, srv)
}
