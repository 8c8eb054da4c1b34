// Package httpserve runs an HTTP server for as long as a context lives:
// the operator's own listeners (the registry token service, the build
// cache service) are controller-runtime runnables built on it.
package httpserve

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"time"
)

// shutdownGrace is how long requests in flight may finish once ctx ends.
const shutdownGrace = 5 * time.Second

// Until listens on addr and serves srv until ctx ends, then shuts it down
// gracefully. A server that stops on its own returns its error. With
// srv.TLSConfig it serves TLS only: a plain HTTP request is answered 400
// by the TLS layer and never reaches the handler.
func Until(ctx context.Context, addr string, srv *http.Server) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if srv.TLSConfig != nil {
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		return srv.Shutdown(shutdown)
	case err := <-done:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}
