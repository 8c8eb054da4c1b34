package teamcache

import (
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The protocol between a builder pod's `helper gocacheprog` and the
// service, over HTTP:
//
//	GET /v1/actions/ACTION  → 200, HeaderOutputID and the body; 404 a miss
//	PUT /v1/actions/ACTION  ← HeaderOutputID and the body; 204 stored
//
// with the pod's token as a Bearer credential. ACTION is the action ID in
// hex. A GET answers from the caller's own cache, then from each
// environment it may read in turn; a PUT writes into its own only.
const (
	HeaderOutputID = "Devloop-Output-Id"
	// HeaderFrom is the environment an answer came from (NAMESPACE/NAME).
	HeaderFrom  = "Devloop-Cache-From"
	actionsPath = "/v1/actions/"

	// DefaultAudience is the audience of the projected token builder pods
	// present: a token made for the cache is good for nothing else.
	DefaultAudience = "devloop-build-cache"
	// DefaultMaxObjectBytes bounds one body.
	DefaultMaxObjectBytes = 512 << 20
	maxTokenBytes         = 16 << 10
)

// Server serves the store to builder pods.
type Server struct {
	Store    *Store
	Reviewer Reviewer
	// Reader reads pods and DevEnvironments as the operator, uncached.
	Reader client.Reader
	// Audience of the builder pods' tokens (DefaultAudience).
	Audience string
	// DefaultServiceAccount is the operator's --default-service-account.
	DefaultServiceAccount string
	// MaxObjectBytes bounds a PUT's body (DefaultMaxObjectBytes).
	MaxObjectBytes int64
	Log            logr.Logger

	callers callers
}

// ServeHTTP answers one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	action, ok := actionID(r.URL.Path)
	if !ok {
		http.Error(w, "want /v1/actions/ACTION (64 hex digits)", http.StatusNotFound)
		return
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" || len(token) > maxTokenBytes {
		http.Error(w, "a builder pod's token is required", http.StatusUnauthorized)
		return
	}
	who, err := s.identify(r.Context(), token)
	if errors.Is(err, errUnauthenticated) {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	if err != nil {
		s.Log.Error(err, "identifying a build cache caller")
		http.Error(w, "cannot review the caller now", http.StatusServiceUnavailable)
		return
	}
	switch r.Method {
	case http.MethodGet:
		s.get(w, who, action)
	case http.MethodPut:
		s.put(w, r, who, action)
	default:
		http.Error(w, "GET or PUT", http.StatusMethodNotAllowed)
	}
}

// get answers from the caller's own entries, then from those of the
// environments it may read, in order.
func (s *Server) get(w http.ResponseWriter, who caller, action []byte) {
	for _, env := range append([]Env{who.Own}, who.ReadFrom...) {
		output, body, size, err := s.Store.Get(env, action)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if errors.Is(err, ErrCorrupt) {
			s.Log.Info("removed a build cache entry that did not match its output ID", "environment", env.String(), "action", hex.EncodeToString(action))
			continue
		}
		if err != nil {
			s.Log.Error(err, "reading the build cache", "environment", env.String())
			http.Error(w, "cannot read the cache", http.StatusInternalServerError)
			return
		}
		defer func() { _ = body.Close() }()
		w.Header().Set(HeaderOutputID, hex.EncodeToString(output))
		w.Header().Set(HeaderFrom, env.String())
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = io.Copy(w, body)
		return
	}
	http.Error(w, "miss", http.StatusNotFound)
}

// put stores the body in the caller's own cache, refusing one that does
// not match its output ID.
func (s *Server) put(w http.ResponseWriter, r *http.Request, who caller, action []byte) {
	output, err := hex.DecodeString(r.Header.Get(HeaderOutputID))
	if err != nil || len(output) != IDLen {
		http.Error(w, "the "+HeaderOutputID+" header must be 64 hex digits", http.StatusBadRequest)
		return
	}
	limit := s.MaxObjectBytes
	if limit <= 0 {
		limit = DefaultMaxObjectBytes
	}
	if r.ContentLength < 0 || r.ContentLength > limit {
		http.Error(w, "a body of known length up to "+strconv.FormatInt(limit, 10)+" bytes is required", http.StatusRequestEntityTooLarge)
		return
	}
	err = s.Store.Put(who.Own, action, output, r.Body, r.ContentLength)
	if errors.Is(err, ErrCorrupt) {
		http.Error(w, "the body does not match its output ID", http.StatusBadRequest)
		return
	}
	if err != nil {
		s.Log.Error(err, "writing the build cache", "caller", who.describe())
		http.Error(w, "cannot write the cache", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func actionID(path string) ([]byte, bool) {
	h, ok := strings.CutPrefix(path, actionsPath)
	if !ok || len(h) != 2*IDLen {
		return nil, false
	}
	b, err := hex.DecodeString(h)
	return b, err == nil
}
