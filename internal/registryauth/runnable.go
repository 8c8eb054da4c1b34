package registryauth

import (
	"context"
	"crypto/tls"
	"errors"
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
	// TLS is the server's certificate: required, since every request
	// carries a Kubernetes token (the registry front's --token-ca-file
	// trusts it).
	TLS *tls.Config
}

// NeedLeaderElection is false: every replica answers token requests.
func (l Listener) NeedLeaderElection() bool { return false }

// Start serves until ctx ends.
func (l Listener) Start(ctx context.Context) error {
	if l.TLS == nil {
		return errors.New("the registry token service serves TLS only: no certificate given")
	}
	mux := http.NewServeMux()
	mux.Handle("/token", l.Handler)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		MaxHeaderBytes:    64 << 10,
		TLSConfig:         l.TLS,
	}
	return httpserve.Until(ctx, l.Addr, srv)
}
