package teamcache

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
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
	ln, err := net.Listen("tcp", l.Addr)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	case err := <-done:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}
