package teamcache

import (
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

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
	// DefaultMaxObjectBytes bounds one body. What the go command puts
	// through GOCACHEPROG are package archives, export data, vet and test
	// outputs (linked executables are never sent: its program cache has
	// no PutExecutable); the largest in a GOCACHE of this operator's
	// builds and tests (client-go, Helm, controller-runtime) is 30 MB.
	DefaultMaxObjectBytes = 128 << 20
	// DefaultBodyGrace and DefaultMinBodyRate bound how long a body may
	// take: the grace plus its size at the rate. A body slower than that
	// is cut and its room released (a trickle would hold it for good).
	DefaultBodyGrace   = 10 * time.Second
	DefaultMinBodyRate = 1 << 20 // bytes per second
	maxTokenBytes      = 16 << 10
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
	// BodyGrace and MinBodyRate bound the time a PUT's body may take
	// (DefaultBodyGrace, DefaultMinBodyRate).
	BodyGrace   time.Duration
	MinBodyRate int64
	Log         logr.Logger

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
	// The listener's read timeout is for the largest body on a slow
	// link; this one's is for its own size.
	if err := http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.bodyTimeout(r.ContentLength))); err != nil {
		s.Log.Error(err, "setting a build cache upload's deadline")
	}
	err = s.Store.Put(who.Own, action, output, r.Body, r.ContentLength)
	switch code := statusOf(err); {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
	case code == http.StatusInternalServerError:
		s.Log.Error(err, "writing the build cache", "caller", who.describe())
		http.Error(w, "cannot write the cache", code)
	default:
		s.Log.V(1).Info("build cache upload refused", "caller", who.describe(), "reason", err.Error())
		if code == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1")
		}
		http.Error(w, err.Error(), code)
	}
}

// bodyTimeout is how long a body of size bytes may take.
func (s *Server) bodyTimeout(size int64) time.Duration {
	grace, rate := s.BodyGrace, s.MinBodyRate
	if grace <= 0 {
		grace = DefaultBodyGrace
	}
	if rate <= 0 {
		rate = DefaultMinBodyRate
	}
	return grace + time.Duration(size/rate)*time.Second
}

// statusOf is the answer to a PUT the store failed with err: the
// refusals of one entry are 4xx (the program skips the entry and keeps
// the cache, client.go), the service's own failures 500.
func statusOf(err error) int {
	var netErr net.Error
	switch {
	case errors.Is(err, ErrCorrupt):
		return http.StatusBadRequest
	case errors.Is(err, ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrBusy), errors.Is(err, ErrFull):
		return http.StatusTooManyRequests
	case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return http.StatusRequestTimeout
	case errors.Is(err, io.ErrUnexpectedEOF):
		// The client went away mid-body.
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

func actionID(path string) ([]byte, bool) {
	h, ok := strings.CutPrefix(path, actionsPath)
	if !ok || len(h) != 2*IDLen {
		return nil, false
	}
	b, err := hex.DecodeString(h)
	return b, err == nil
}
