package teamcache

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/devloop-dev/devloop/internal/httpserve"
	"github.com/devloop-dev/devloop/internal/reviewguard"
)

// Listener serves the Server on Addr while the manager runs, on the
// leader only: the store is on its disk, and one store is what every
// environment must see.
type Listener struct {
	Addr   string
	Server *Server
	// TLS is the server's certificate: required. The bearer builder pods
	// send is a write credential of their environment's store, and what
	// the service answers is compiled into their images: neither crosses
	// the pod network in clear.
	TLS *tls.Config
}

// NeedLeaderElection is true: only the leader serves its store.
func (l Listener) NeedLeaderElection() bool { return true }

// Start serves until ctx ends.
func (l Listener) Start(ctx context.Context) error {
	if l.TLS == nil {
		return errors.New("the build cache service serves TLS only: no certificate given")
	}
	mux := http.NewServeMux()
	mux.Handle(actionsPath, l.Server)
	srv := &http.Server{
		Handler:           l.guarded(mux),
		ReadHeaderTimeout: 10 * time.Second,
		// A body of DefaultMaxObjectBytes on a slow link.
		ReadTimeout:    10 * time.Minute,
		WriteTimeout:   10 * time.Minute,
		MaxHeaderBytes: 64 << 10,
		TLSConfig:      l.TLS,
	}
	return httpserve.Until(ctx, l.Addr, srv)
}

// guarded answers, before next, a request whose token would cost a
// TokenReview when the token was refused moments ago (401) or its source
// asked for too many reviews (429): an anonymous flood is not a flood of
// reviews. Known callers (a build's thousands of requests) pass. Sources
// are peer addresses: builder pods reach the service directly.
func (l Listener) guarded(next http.Handler) http.Handler {
	c := &l.Server.callers
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if ok && token != "" && len(token) <= maxTokenBytes && !c.known(token) {
			switch c.guard.Check(token, reviewguard.Peer(r)) {
			case reviewguard.RefusedRecently:
				http.Error(w, errUnauthenticated.Error()+" (refused moments ago)", http.StatusUnauthorized)
				return
			case reviewguard.TooMany:
				w.Header().Set("Retry-After", "1")
				http.Error(w, "too many token reviews from this address", http.StatusTooManyRequests)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
